// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command prebuild builds into the runtimes' cache the third-party
// programs that this module's suites run, longest first: Prometheus and
// promtool (deploy, internal/testing/promtest, test/kube), the newest
// containerd (test/kube's nodes), CRI-O and the other containerd versions
// of the runtime matrix (internal/testing/runtimetest, test/e2e), then
// critest, crictl and ginkgo (sim, test/docs). hack/test.sh runs it in
// the background while make check and the tests run; see
// internal/testing/prebuild.
//
//	go run ./hack/prebuild
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/plegkit/pleg/internal/testing/prebuild"
	"github.com/plegkit/pleg/internal/testing/promtest"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	steps := []prebuild.Step{{
		Name: "Prometheus and promtool " + promtest.Version,
		Cold: "about 7 CPU-minutes",
		Build: func(ctx context.Context, logf func(string, ...any)) error {
			_, err := promtest.Build(ctx, logf)
			return err
		},
	}}
	matrix, err := runtimetest.Matrix()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// The newest containerd first: test/kube's real nodes run it, and
	// theirs are the longest suites. Then CRI-O, the longest build of the
	// runtimes, then the other containerd versions. Each version once (the
	// matrix runs CRI-O with pod events on and off).
	newest := runtimetest.DefaultContainerdVersions[len(runtimetest.DefaultContainerdVersions)-1]
	seen := map[string]bool{}
	add := func(keep func(runtimetest.Spec) bool) {
		for _, spec := range matrix {
			key := string(spec.Kind) + spec.Version
			if !keep(spec) || spec.Version == runtimetest.DebianContainerd16 || seen[key] {
				continue
			}
			seen[key] = true
			steps = append(steps, runtimeStep(spec))
		}
	}
	add(func(s runtimetest.Spec) bool { return s.Kind == runtimetest.Containerd && s.Version == newest })
	add(func(s runtimetest.Spec) bool { return s.Kind == runtimetest.CRIO })
	add(func(s runtimetest.Spec) bool { return s.Kind == runtimetest.Containerd })
	steps = append(steps, prebuild.Step{
		Name: "critest, crictl and ginkgo " + runtimetest.CritestVersion,
		Cold: "about 2 CPU-minutes",
		Build: func(ctx context.Context, logf func(string, ...any)) error {
			_, err := runtimetest.Critest(ctx, logf)
			return err
		},
	})
	if err := prebuild.Run(ctx, os.Stdout, "prebuild", steps); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func runtimeStep(spec runtimetest.Spec) prebuild.Step {
	if spec.Kind == runtimetest.CRIO {
		return prebuild.Step{
			Name: "CRI-O " + spec.Version,
			Cold: "about 5 CPU-minutes",
			Build: func(ctx context.Context, logf func(string, ...any)) error {
				_, err := runtimetest.InstallCRIO(ctx, spec.Version, logf)
				return err
			},
		}
	}
	return prebuild.Step{
		Name: "containerd " + spec.Version,
		Cold: "about 3 CPU-minutes",
		Build: func(ctx context.Context, logf func(string, ...any)) error {
			_, err := runtimetest.InstallContainerd(ctx, spec.Version, logf)
			return err
		},
	}
}
