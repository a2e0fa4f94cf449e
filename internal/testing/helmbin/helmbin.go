// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package helmbin builds helm, the version test/chart's go.mod names as
// its tool, once per machine into the runtimes' cache (kube/bin/helm,
// beside the Kubernetes components), for every suite that runs it:
// test/chart's doc commands and test/kube's real node. Each built its
// own before, test/chart into a temporary directory on every run; the
// two at once compiled helm's packages twice.
package helmbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/plegkit/pleg/internal/testing/cachelock"
)

// Build builds helm.sh/helm/v4/cmd/helm in chartModule, the directory of
// test/chart's go.mod, into the cache and returns its path. `go build`
// relinks nothing that is up to date; concurrent builds, also from other
// test processes, take turns through a lock file. Linked stripped
// (-s -w), as the harness links every third-party program.
func Build(ctx context.Context, chartModule string, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(cache, "kube", "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	unlock, err := cachelock.Acquire(filepath.Join(binDir, "..", "helm.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	out := filepath.Join(binDir, "helm")
	if _, err := os.Stat(out); err != nil {
		logf("helmbin: building helm from test/chart's go.mod into %s, once (about 3 CPU-minutes)", binDir)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-ldflags=-s -w", "-o", out, "helm.sh/helm/v4/cmd/helm")
	cmd.Dir = chartModule
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build helm in %s: %w\n%s", chartModule, err, tail(string(output), 20))
	}
	if d := time.Since(start); d > 10*time.Second {
		logf("helmbin: built helm in %v", d.Round(time.Second))
	}
	return out, nil
}

// cacheDir is runtimetest.CacheDir's rule, which this package does not
// import: that package would bring the runtimes' dependencies into
// test/chart's build list.
func cacheDir() (string, error) {
	if d := os.Getenv("PLEG_CACHE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("helmbin: no cache directory (set PLEG_CACHE_DIR): %w", err)
	}
	return filepath.Join(d, "pleg"), nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
