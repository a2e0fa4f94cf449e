// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package prebuild

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRunSaysWhatItBuilds: a step that builds says so, with its cold cost,
// passes on the harness's lines and says how long it took; one up to date
// says nothing; a failure is said and returned, and the steps after it
// still run.
func TestRunSaysWhatItBuilds(t *testing.T) {
	var ran []string
	steps := []Step{
		{Name: "current", Cold: "1 CPU-minute", Build: func(context.Context, func(string, ...any)) error {
			ran = append(ran, "current")
			return nil
		}},
		{Name: "runtime v1", Cold: "about 5 CPU-minutes", Build: func(_ context.Context, logf func(string, ...any)) error {
			ran = append(ran, "runtime")
			logf("harness: building runtime %s", "v1")
			return nil
		}},
		{Name: "broken", Cold: "2 CPU-minutes", Build: func(context.Context, func(string, ...any)) error {
			ran = append(ran, "broken")
			return errors.New("no module proxy\nsecond line")
		}},
		{Name: "last", Cold: "1 CPU-minute", Build: func(context.Context, func(string, ...any)) error {
			ran = append(ran, "last")
			return nil
		}},
	}
	var out bytes.Buffer
	err := Run(context.Background(), &out, "prebuild", steps)
	if err == nil || !strings.Contains(err.Error(), "broken failed") {
		t.Errorf("Run: %v, want broken's failure", err)
	}
	if got := strings.Join(ran, ","); got != "current,runtime,broken,last" {
		t.Errorf("ran %s", got)
	}
	want := []string{
		`^prebuild \[0m00s\] runtime v1: building \(cold: about 5 CPU-minutes\)$`,
		`^prebuild \[0m00s\]   harness: building runtime v1$`,
		`^prebuild \[0m00s\] runtime v1: built in 0m00s$`,
		`^prebuild \[0m00s\] broken: FAILED after 0m00s \(its tests will try again and say why\): no module proxy$`,
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d: %q, want %s", i, lines[i], w)
		}
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[int]string{0: "0m00s", 59: "0m59s", 61: "1m01s", 3723: "62m03s"} {
		if got := clock(secs(d)); got != want {
			t.Errorf("clock(%ds) = %s, want %s", d, got, want)
		}
	}
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }
