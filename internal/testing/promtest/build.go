// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package promtest gives tests a real Prometheus: it builds prometheus
// and promtool from their Go module (github.com/prometheus/prometheus at
// Version) once per machine into the runtimes' cache, runs promtool, and
// starts private Prometheus servers with a configuration and rule files
// of the test's, which it then queries: instant queries, the alerts and
// their states, the targets, waiting on conditions rather than sleeping.
//
// The module is never a dependency of pleg's: `go install` refuses it
// (its go.mod has replace directives), so Build requires it from a
// scratch module of its own, as internal/testing/runtimetest builds containerd
// 1.7, and builds it without its service discovery plugins but
// Kubernetes' (tags remove_all_sd and enable_kubernetes_sd: tests scrape
// static targets, and pods found through a test cluster's API server),
// which leaves the cloud providers' SDKs out of the build.
//
// Typical use:
//
//	bin := promtest.Require(t) // skips, or fails under CI=true, if it cannot be built
//	srv := promtest.StartT(t, bin, promtest.Config{ScrapeConfigs: ..., RuleFiles: ...})
//	alert, err := srv.WaitAlert(ctx, promtest.AlertIs("PlegDown", "firing", map[string]string{"instance": "node-1"}))
package promtest

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
	"testing"
	"time"

	"github.com/plegkit/pleg/internal/testing/cachelock"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// The module prometheus and promtool are built from.
const (
	Module  = "github.com/prometheus/prometheus"
	Version = "v0.316.0"
)

// buildTags leave out every service discovery mechanism but the static,
// file and Kubernetes ones.
const buildTags = "remove_all_sd,enable_kubernetes_sd"

// buildTimeout bounds Require's build: about 10 CPU-minutes the first
// time, so a quarter of an hour on two cores kept busy by other builds.
const buildTimeout = 30 * time.Minute

// Binaries are the built prometheus and promtool.
type Binaries struct {
	Prometheus, Promtool string
}

// InCI reports whether CI=true: then a test that cannot get its
// Prometheus fails instead of skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require returns the binaries, building them if needed; when they cannot
// be built the test fails under CI=true and is skipped elsewhere.
func Require(t testing.TB) Binaries {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	b, err := Build(ctx, t.Logf)
	if err != nil {
		if InCI() {
			t.Fatalf("a real Prometheus is required under CI=true but could not be built: %v", err)
		}
		t.Skipf("skipping, no Prometheus (set CI=true to make this a failure): %v", err)
	}
	return b
}

// Build returns prometheus and promtool of Version from
// <cache>/prometheus/<Version>/bin (the cache of runtimetest.CacheDir),
// building them first if they are missing or of another version. Builds
// from concurrent test processes take turns through a lock file.
func Build(ctx context.Context, logf func(string, ...any)) (Binaries, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	cache, err := runtimetest.CacheDir()
	if err != nil {
		return Binaries{}, err
	}
	dir := filepath.Join(cache, "prometheus", Version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("promtest: %w", err)
	}
	unlock, err := cachelock.Acquire(dir + ".lock")
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	bin := filepath.Join(dir, "bin")
	b := Binaries{Prometheus: filepath.Join(bin, "prometheus"), Promtool: filepath.Join(bin, "promtool")}
	if current(b) == nil {
		return b, nil
	}
	logf("promtest: building prometheus and promtool %s into %s, once (minutes)", Version, bin)
	start := time.Now()
	if err := buildThroughScratchModule(ctx, filepath.Join(dir, "src"), bin); err != nil {
		return b, fmt.Errorf("promtest: prometheus %s is not in %s and could not be built: %w", Version, bin, err)
	}
	logf("promtest: built prometheus and promtool in %v", time.Since(start).Round(time.Second))
	return b, current(b)
}

// current checks that both binaries are there and built from Version:
// `go build` of a dependency's command records that module as the main
// one.
func current(b Binaries) error {
	for _, p := range []string{b.Prometheus, b.Promtool} {
		bi, err := buildinfo.ReadFile(p)
		if err != nil {
			return err
		}
		if bi.Main.Path != Module || bi.Main.Version != Version {
			return fmt.Errorf("promtest: %s was built from %s %s, not %s %s", p, bi.Main.Path, bi.Main.Version, Module, Version)
		}
		for _, s := range bi.Settings {
			if s.Key == "-tags" && s.Value != buildTags {
				return fmt.Errorf("promtest: %s was built with tags %s, not %s", p, s.Value, buildTags)
			}
		}
	}
	return nil
}

// buildThroughScratchModule builds the two commands through a module in
// src that requires Module: a dependency's replace directives do not
// apply, so Go resolves its requirements as the module's own go.sum has
// them, minus the replacements, which are for its own development.
func buildThroughScratchModule(ctx context.Context, src, bin string) error {
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	cmds := []string{Module + "/cmd/prometheus", Module + "/cmd/promtool"}
	files := map[string]string{
		"go.mod": fmt.Sprintf("// Generated by pleg's promtest to build %s %s.\nmodule pleg.test/prombuild\n\ngo "+
			"1.26\n\nrequire %s %s\n",
			Module, Version, Module, Version),
		// The imports keep the commands' dependencies in go.mod.
		"tools.go": fmt.Sprintf("//go:build tools\n\npackage tools\n\nimport (\n\t_ %q\n\t_ %q\n)\n", cmds[0], cmds[1]),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	_ = os.Remove(filepath.Join(src, "go.sum"))
	if err := goCommand(ctx, src, "mod", "tidy"); err != nil {
		return err
	}
	// -s -w: no symbol table, no DWARF; a test runs them, nobody debugs them.
	args := []string{"build", "-tags", buildTags, "-ldflags=-s -w", "-o", bin + "/"}
	return goCommand(ctx, src, append(args, cmds...)...)
}

// goCommand runs the go command in dir and says what failed with the
// tail of its output.
func goCommand(ctx context.Context, dir string, args ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		//nolint:staticcheck // a test binary runs where it was built: its GOROOT is this machine's
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("`go %s` in %s failed (it needs the Go module proxy): %w\n%s",
			strings.Join(args, " "), dir, err, tail(string(out), 20))
	}
	return nil
}

// RunPromtool runs promtool with args in dir and returns its output. A
// failure of promtool's (a rule test that fails, a file that does not
// parse) is an error holding that output.
func (b Binaries) RunPromtool(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.Promtool, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), fmt.Errorf("promtool %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), fmt.Errorf("promtool: %w", err)
	}
	return string(out), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
