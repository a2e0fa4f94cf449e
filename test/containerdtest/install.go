package containerdtest

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// Binaries are the absolute paths of everything an Instance runs.
type Binaries struct {
	Containerd string // containerd of ContainerdVersion (Legacy: LegacyBinDir's)
	Shim       string // its containerd-shim-runc-v2
	Ctr        string // its ctr
	Version    string // containerd's version: ContainerdVersion, or e.g. 1.6.20~ds1
	Runc       string // runc, from PATH (or installed with apt-get)
	TestImg    string // the static test/testimg binary
	ImageTar   string // docker-archive of TestImg, tagged SandboxImage and TestImage
}

// BinDir is the directory holding containerd and its shim (<cache>/bin, or
// LegacyBinDir); it goes first on containerd's PATH so that containerd
// finds this shim.
func (b Binaries) BinDir() string { return filepath.Dir(b.Containerd) }

const containerdModule = "github.com/containerd/containerd/v2"

// CacheDir returns the project-local cache directory: $PLEG_CACHE_DIR if
// set, else <module root>/.cache, the module root being the first directory
// holding a go.mod found walking up from the working directory.
func CacheDir() (string, error) {
	if d := os.Getenv("PLEG_CACHE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("containerdtest: cannot locate the cache dir (set PLEG_CACHE_DIR): %w", err)
	}
	return filepath.Join(root, ".cache"), nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the working directory")
		}
		dir = parent
	}
}

// Install makes sure everything a test instance needs is present, and
// returns where it is. It installs containerd, containerd-shim-runc-v2 and
// ctr of ContainerdVersion into <cache>/bin with `go install` unless binaries
// of that version are already there; finds runc on PATH (installing
// Debian's package with apt-get when running as root and it is missing);
// builds the test image binary and its docker-archive into <cache>/testimg.
// logf (may be nil) reports slow steps. Concurrent calls, also from several
// test processes, are serialised with a lock file in the cache dir.
func Install(ctx context.Context, logf func(string, ...any)) (Binaries, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var b Binaries
	cache, err := CacheDir()
	if err != nil {
		return b, err
	}
	if err := os.MkdirAll(filepath.Join(cache, "bin"), 0o755); err != nil {
		return b, fmt.Errorf("containerdtest: create cache dir: %w", err)
	}
	unlock, err := lockFile(filepath.Join(cache, "containerdtest.lock"))
	if err != nil {
		return b, err
	}
	defer unlock()

	goBin, err := goTool()
	if err != nil {
		return b, err
	}

	bin := filepath.Join(cache, "bin")
	b.Containerd = filepath.Join(bin, "containerd")
	b.Shim = filepath.Join(bin, "containerd-shim-runc-v2")
	b.Ctr = filepath.Join(bin, "ctr")
	b.Version = ContainerdVersion
	var missing []string
	for _, p := range []string{b.Containerd, b.Shim, b.Ctr} {
		if v, err := binaryVersion(p); err != nil || v != ContainerdVersion {
			missing = append(missing, containerdModule+"/cmd/"+filepath.Base(p)+"@"+ContainerdVersion)
			if err == nil {
				logf("containerdtest: %s is %s, want %s: reinstalling", p, v, ContainerdVersion)
			}
		}
	}
	if len(missing) > 0 {
		logf("containerdtest: go install %s (GOBIN=%s), this takes a minute or two", strings.Join(missing, " "), bin)
		cmd := exec.CommandContext(ctx, goBin, append([]string{"install"}, missing...)...)
		cmd.Env = append(os.Environ(), "GOBIN="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("containerdtest: containerd %s is not in %s and `GOBIN=%s go install %s` failed (it needs the Go module proxy; or put the binaries there yourself): %v\n%s",
				ContainerdVersion, bin, bin, strings.Join(missing, " "), err, tail(string(out), 20))
		}
		for _, p := range []string{b.Containerd, b.Shim, b.Ctr} {
			if v, err := binaryVersion(p); err != nil || v != ContainerdVersion {
				return b, fmt.Errorf("containerdtest: after go install, %s has version %q (err %v), want %s", p, v, err, ContainerdVersion)
			}
		}
	}

	if b.Runc, err = findRunc(ctx, logf); err != nil {
		return b, err
	}
	if err := buildTestImage(ctx, goBin, cache, &b); err != nil {
		return b, err
	}
	return b, nil
}

// binaryVersion reports the containerd module version a binary was built
// from: the Go build info (exact for `go install ...@version` builds), or
// else the third field of `<binary> --version`.
func binaryVersion(path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	if bi, err := buildinfo.ReadFile(path); err == nil && bi.Main.Path == containerdModule && strings.HasPrefix(bi.Main.Version, "v") {
		return bi.Main.Version, nil
	}
	v, err := printedVersion(path)
	if err != nil {
		return "", err
	}
	v, _, _ = strings.Cut(v, "+")
	return "v" + v, nil
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
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("containerdtest: the go command is not on PATH (needed to install containerd and build the test image)")
}

func findRunc(ctx context.Context, logf func(string, ...any)) (string, error) {
	look := func() (string, error) {
		if p, err := exec.LookPath("runc"); err == nil {
			return filepath.Abs(p)
		}
		for _, d := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin"} {
			p := filepath.Join(d, "runc")
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
		return "", errors.New("containerdtest: runc is not on PATH; install it (Debian/Ubuntu: `apt-get install -y runc`)")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", errors.New("containerdtest: runc is not on PATH and there is no apt-get to install it; install runc")
	}
	logf("containerdtest: runc not found, running apt-get install -y runc")
	install := func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "runc")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	out, err := install()
	if err != nil {
		// The package lists may be missing or stale.
		if upd, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
			out = append(out, upd...)
		} else {
			out, err = install()
		}
	}
	if err != nil {
		return "", fmt.Errorf("containerdtest: runc is not on PATH and `apt-get install -y runc` failed: %v\n%s", err, tail(string(out), 20))
	}
	if p, err := look(); err == nil {
		return p, nil
	}
	return "", errors.New("containerdtest: apt-get installed runc but it is still not found")
}

// buildTestImage builds test/testimg statically and writes the image tarball.
func buildTestImage(ctx context.Context, goBin, cache string, b *Binaries) error {
	root, err := moduleRoot()
	if err != nil {
		return fmt.Errorf("containerdtest: cannot build the test image: %w", err)
	}
	dir := filepath.Join(cache, "testimg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	b.TestImg = filepath.Join(dir, "testimg")
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", b.TestImg, "./test/testimg")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("containerdtest: building the test image binary (go build ./test/testimg in %s) failed: %v\n%s", root, err, tail(string(out), 20))
	}
	b.ImageTar = filepath.Join(dir, "image.tar")
	if err := writeImageArchive(b.ImageTar, b.TestImg, SandboxImage, TestImage); err != nil {
		return fmt.Errorf("containerdtest: writing the test image archive: %w", err)
	}
	return nil
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("containerdtest: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
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
