// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/plegkit/pleg/internal/testing/cachelock"
)

// Binaries are the absolute paths of everything an Instance runs; those a
// runtime does not use are empty.
type Binaries struct {
	// Runtime is containerd or crio.
	Runtime string
	Shim    string // containerd: its containerd-shim-runc-v2
	Ctr     string // containerd: its ctr, which imports the test image
	Conmon  string // CRI-O: its container monitor
	Pinns   string // CRI-O: its namespace pinner, built from its module
	Skopeo  string // CRI-O: copies the test image into its storage
	// CNIPlugins is, for CRI-O, the directory of the standard CNI
	// plugins, which it wants to see before it reports the pod network
	// ready.
	CNIPlugins string
	Version    string // the runtime's version: "v2.4.2", "v1.36.3", "1.6.20~ds1"
	Runc       string // runc, from PATH (or installed with apt-get)
	TestImg    string // the static test/testimg binary
	// ImageTar is a docker-archive of TestImg, tagged SandboxImage and
	// TestImage.
	ImageTar string
}

// BinDir is the directory holding the runtime (and containerd's shim); it
// goes first on the runtime's PATH so that containerd finds this shim.
func (b Binaries) BinDir() string { return filepath.Dir(b.Runtime) }

// CacheDir returns the cache of built runtimes: $PLEG_CACHE_DIR if set,
// else pleg in the user's cache directory (~/.cache/pleg, beside Go's own
// build cache), so that every checkout and every CI run on a machine
// builds each runtime once; failing that, <module root>/.cache.
func CacheDir() (string, error) {
	if d := os.Getenv("PLEG_CACHE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "pleg"), nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("runtimetest: cannot locate the cache dir (set PLEG_CACHE_DIR): %w", err)
	}
	return filepath.Join(root, ".cache"), nil
}

// moduleRoot is the root of pleg's module (whose test/testimg the test
// image is built from): the first directory above the working directory
// whose go.mod declares it, so that the tests of the modules nested in
// the repository (test/kube) find it too.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			regexp.MustCompile(`(?m)^module github\.com/plegkit/pleg\s*$`).Match(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/plegkit/pleg above the working directory")
		}
		dir = parent
	}
}

// cacheSubdir creates and returns <cache>/<elem...>.
func cacheSubdir(elem ...string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(append([]string{cache}, elem...)...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("runtimetest: create cache dir: %w", err)
	}
	return dir, nil
}

// common completes b with what every runtime needs: runc, and the test
// image built from test/testimg.
func common(ctx context.Context, b *Binaries, logf func(string, ...any)) error {
	var err error
	if b.Runc, err = aptBinary(ctx, "runc", "runc", logf); err != nil {
		return err
	}
	return buildTestImage(ctx, b)
}

// moduleVersion reports the version of module mod a binary was built
// from, as its Go build info tells: the main module's for `go install
// mod/cmd@version`, a dependency's for a build through a scratch module.
func moduleVersion(path, mod string) (string, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", err
	}
	if bi.Main.Path == mod {
		return bi.Main.Version, nil
	}
	for _, d := range bi.Deps {
		if d.Path == mod {
			if d.Replace != nil {
				return d.Replace.Version, nil
			}
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s was not built from %s", path, mod)
}

// printedVersion is the version `path --version` prints (third field),
// without a leading v.
func printedVersion(path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		return "", fmt.Errorf("%s --version: unexpected output %q", path, out)
	}
	return strings.TrimPrefix(f[2], "v"), nil
}

func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	//nolint:staticcheck // a test binary runs where it was built: its GOROOT is this machine's
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("runtimetest: the go command is not on PATH (needed to build the runtimes and the test image)")
}

// goCommand runs the go command in dir with extra environment, and says
// what failed with the tail of its output.
func goCommand(ctx context.Context, dir string, env []string, args ...string) error {
	goBin, err := goTool()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf(
			"`%s go %s` in %s failed (it needs the Go module proxy): %w\n%s",
			strings.Join(env, " "),
			strings.Join(args, " "),
			dir,
			err,
			tail(string(out), 20),
		)
	}
	return nil
}

// aptBinary finds the executable name on PATH or in the usual system
// directories, installing Debian's package pkg with apt-get when it is
// missing and running as root.
func aptBinary(ctx context.Context, name, pkg string, logf func(string, ...any)) (string, error) {
	look := func() (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return filepath.Abs(p)
		}
		dirs := []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/usr/libexec/podman"}
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", errors.New("not found")
	}
	if p, err := look(); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf(
			"runtimetest: %s is not on PATH; install it (Debian/Ubuntu: `apt-get install -y %s`)",
			name,
			pkg,
		)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("runtimetest: %s is not on PATH and there is no apt-get to install it; install %s", name, pkg)
	}
	logf("runtimetest: %s not found, running apt-get install -y %s", name, pkg)
	if out, err := aptInstall(ctx, pkg); err != nil {
		return "", fmt.Errorf(
			"runtimetest: %s is not on PATH and `apt-get install -y %s` failed: %w\n%s",
			name,
			pkg,
			err,
			tail(string(out), 20),
		)
	}
	if p, err := look(); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("runtimetest: apt-get installed %s but %s is still not found", pkg, name)
}

// aptInstall installs Debian packages without prompting or replacing any
// other package, updating the package lists once if the first try fails
// (they may be missing or stale). Installs are serialised across test
// processes: dpkg takes one at a time.
func aptInstall(ctx context.Context, pkgs ...string) ([]byte, error) {
	dir, err := cacheSubdir()
	if err != nil {
		return nil, err
	}
	unlock, err := cachelock.Acquire(filepath.Join(dir, "apt.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	install := func() ([]byte, error) {
		args := append([]string{"install", "-y", "--no-install-recommends", "--no-remove",
			"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}, pkgs...)
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	out, err := install()
	if err != nil {
		if upd, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
			out = append(out, upd...)
		} else {
			out, err = install()
		}
	}
	return out, err
}

// buildTestImage builds test/testimg statically and writes the image
// tarball into <cache>/testimg.
func buildTestImage(ctx context.Context, b *Binaries) error {
	root, err := moduleRoot()
	if err != nil {
		return fmt.Errorf("runtimetest: cannot build the test image: %w", err)
	}
	dir, err := cacheSubdir("testimg")
	if err != nil {
		return err
	}
	// The lock the harness has always taken for this directory: test
	// processes of older checkouts build the same files.
	unlock, err := cachelock.Acquire(filepath.Join(filepath.Dir(dir), "containerdtest.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	b.TestImg = filepath.Join(dir, "testimg")
	if err := goCommand(ctx, root, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH},
		"build", "-trimpath", "-ldflags=-s -w", "-o", b.TestImg, "./test/testimg"); err != nil {
		return fmt.Errorf("runtimetest: building the test image binary: %w", err)
	}
	b.ImageTar = filepath.Join(dir, "image.tar")
	if err := writeImageArchive(b.ImageTar, b.TestImg, SandboxImage, TestImage); err != nil {
		return fmt.Errorf("runtimetest: writing the test image archive: %w", err)
	}
	return nil
}

// timed logs how long a slow step took.
func timed(logf func(string, ...any), what string) func() {
	t0 := time.Now()
	return func() { logf("runtimetest: %s took %v", what, time.Since(t0).Round(time.Second)) }
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// HostBinary finds the executable name on the host, installing Debian's
// package pkg with apt-get when it is missing and running as root: for
// the tools a test node needs beside its runtime (iptables, say).
func HostBinary(ctx context.Context, name, pkg string, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return aptBinary(ctx, name, pkg, logf)
}
