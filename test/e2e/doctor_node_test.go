// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime/cri"
)

// pleg doctor's live view on a real runtime names the cause first: a
// pod's shim stopped (containerd's shim, CRI-O's conmon), named with its
// pod, then the runtime itself stopped, ahead of "the runtime does not
// answer"; each action in the runtime's own tools.
func TestDoctorLiveNamesTheCause(t *testing.T) {
	for _, spec := range matrix(t) {
		t.Run(spec.String(), func(t *testing.T) {
			t.Parallel()
			in := privateRuntime(t, spec)
			pod := newPod("doctor-live")
			sb, err := in.RunPod(ctx(t), pod)
			must(t, err)
			id, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
			must(t, err)
			rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
			must(t, err)
			defer rt.Close()
			diagnose := func(budget time.Duration) *doctor.Report {
				t.Helper()
				r, err := doctor.Diagnose(ctx(t), rt.Client(), doctor.Options{Endpoint: in.Endpoint, Budget: budget,
					Node: flightrec.NewNodeProbe(flightrec.NodeConfig{Endpoint: in.Endpoint})})
				must(t, err)
				return r
			}
			first := func(r *doctor.Report) string {
				var all []string
				for _, f := range r.Findings {
					all = append(all, f.ID+": "+f.Title)
				}
				return strings.Join(all, "\n")
			}

			shim, shimName, tool := 0, "containerd-shim", "journalctl -u containerd"
			if spec.Kind == runtimetest.CRIO {
				shim, shimName, tool = conmonOf(t, id), "conmon", "journalctl -u crio"
			} else {
				shim = shimOf(t, in, sb)
			}
			start := time.Now()
			unfreeze := freezeUntil(t, shim)
			r := diagnose(20 * time.Second)
			unfreeze()
			t.Logf("%s: shim %d stopped: diagnosed in %v:\n%s", spec, shim, time.Since(start).Round(time.Millisecond), first(r))
			if f := r.Findings; len(f) == 0 || f[0].ID != "shim-stopped" ||
				!strings.Contains(f[0].Title, fmt.Sprintf("The shim %s (pid %d) of pod e2e/doctor-live is stopped (T)", shimName, shim)) {
				t.Errorf("first finding with the shim stopped: want shim-stopped naming the pod:\n%s", first(r))
			}

			start = time.Now()
			unfreeze = freezeUntil(t, in.Pid())
			r = diagnose(12 * time.Second)
			unfreeze()
			t.Logf("%s: runtime %d stopped: diagnosed in %v:\n%s", spec, in.Pid(), time.Since(start).Round(time.Millisecond), first(r))
			f := r.Findings
			if len(f) < 2 || f[0].ID != "runtime-stopped" ||
				!strings.Contains(f[0].Title, fmt.Sprintf("(pid %d) is stopped (T): resume it with kill -CONT %d", in.Pid(), in.Pid())) ||
				!strings.Contains(f[0].Action, map[bool]string{true: "crio status goroutines", false: "writes containerd's goroutines"}[spec.Kind == runtimetest.CRIO]) {
				t.Errorf("first finding with the runtime stopped: want runtime-stopped with its stacks' action:\n%s", first(r))
			}
			for _, x := range f {
				if x.ID == "runtime-unreachable" && !strings.Contains(x.Action, tool) {
					t.Errorf("runtime-unreachable's action %q: want %q", x.Action, tool)
				}
			}
		})
	}
}

// freezeUntil stops pid with SIGSTOP and returns what resumes it, which
// the test's end calls too, whatever happened.
func freezeUntil(t *testing.T, pid int) func() {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume := func() {
		once.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Errorf("resuming %d: %v", pid, err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}
