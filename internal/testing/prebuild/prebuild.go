// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package prebuild runs the builds of the third-party programs that the
// test suites run (containerd, CRI-O, critest, Prometheus, Kubernetes,
// helm) one after the other, longest first, before the suites ask for
// them, and says what it builds and how long each took: on a new machine
// they take most of an hour of CPU, which a person should see go by.
// hack/test.sh starts hack/prebuild (this module's builds) and
// test/kube/prebuild (Kubernetes and helm) in the background. Each build
// is the harness's own (runtimetest, promtest, kubetest), under the
// cache's lock: a suite that needs a program wait for the build under
// way instead of starting its own, and one that is up to date costs a
// check.
package prebuild

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Step is one build.
type Step struct {
	// Name is what is built, as a person reads it: "CRI-O v1.36.3".
	Name string
	// Cold is what the build costs on a new machine, for the line that
	// says it started: "about 5 CPU-minutes".
	Cold string
	// Build builds it, or finds it up to date; logf receives the
	// harness's own lines.
	Build func(ctx context.Context, logf func(string, ...any)) error
}

// upToDate is how long a step that built nothing may take: a check of
// what is there, a go build that finds its cache current.
const upToDate = 10 * time.Second

// Run runs steps in order, writing a line to w when a step builds
// something (the harness's line, with the cost of a cold build) and when
// it ends, each with the time since Run began. It goes on past a failed
// step, whose test will build it again and fail with the reason, and
// returns the failures.
func Run(ctx context.Context, w io.Writer, prefix string, steps []Step) error {
	start := time.Now()
	say := func(format string, args ...any) {
		// A progress line that cannot be written changes nothing built.
		_, _ = fmt.Fprintf(w, "%s [%s] %s\n", prefix, clock(time.Since(start)), fmt.Sprintf(format, args...))
	}
	var failed []string
	for _, s := range steps {
		t0 := time.Now()
		building := false
		logf := func(format string, args ...any) {
			line := fmt.Sprintf(format, args...)
			if !building {
				building = true
				say("%s: building (cold: %s)", s.Name, s.Cold)
			}
			say("  %s", line)
		}
		err := s.Build(ctx, logf)
		d := time.Since(t0)
		switch {
		case err != nil:
			failed = append(failed, s.Name)
			say("%s: FAILED after %s (its tests will try again and say why): %v", s.Name, clock(d), firstLine(err))
		case building || d > upToDate:
			say("%s: built in %s", s.Name, clock(d))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("prebuild: %s failed", strings.Join(failed, ", "))
	}
	say("%d programs ready in %s", len(steps), clock(time.Since(start)))
	return nil
}

// clock is d as minutes and seconds, 3m07s.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
