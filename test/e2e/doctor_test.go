// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime/cri"
)

// pleg doctor against a real runtime with a few pods: healthy, and its
// figures are those of the pods it was given.
func TestDoctorOnRuntime(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		var uids []string
		for i := range 3 {
			pod := newPod("doctor")
			sb, err := in.RunPod(ctx(t), pod)
			must(t, err)
			for _, name := range []string{"app", "sidecar"} {
				_, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: name, Args: sleeping})
				must(t, err)
			}
			if i == 0 {
				_, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "job", Args: []string{"exit", "0", "0s"}})
				must(t, err)
			}
			uids = append(uids, pod.UID)
		}
		rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
		must(t, err)
		defer rt.Close()

		r, err := doctor.Diagnose(ctx(t), rt.Client(), doctor.Options{Endpoint: in.Endpoint, Budget: 30 * time.Second})
		must(t, err)
		var text bytes.Buffer
		must(t, render.Text(&text, r))
		t.Logf("%s:\n%s", in.Spec, text.String())

		if r.Verdict != doctor.Healthy {
			t.Errorf("verdict %s, findings %+v", r.Verdict, r.Findings)
		}
		if r.Runtime.Name != runtimeName(in.Spec) || r.Runtime.APIVersion != "v1" || len(r.Runtime.Conditions) < 2 {
			t.Errorf("runtime %+v", r.Runtime)
		}
		// Other conditions (containerd warns of cgroup v1 in one) are not the
		// kubelet's business.
		for _, c := range r.Runtime.Conditions {
			if (c.Type == "RuntimeReady" || c.Type == "NetworkReady") && !c.Status {
				t.Errorf("condition %+v", c)
			}
		}
		if want := map[bool]doctor.Availability{true: doctor.Supported, false: doctor.Unsupported}[in.Spec.HasEvents()]; r.Support.ContainerEvents.Availability != want {
			t.Errorf("%s: event stream %+v, want %s", in.Spec, r.Support.ContainerEvents, want)
		}
		// Other tests' pods may be there too; ours are.
		if r.Workload.Pods < 3 || r.Workload.ContainersRunning < 6 || r.Inspection.Pods != r.Workload.Pods {
			t.Errorf("workload %+v, %d pods inspected", r.Workload, r.Inspection.Pods)
		}
		seen := make(map[string]bool)
		for _, p := range r.Inspection.SlowestPods {
			seen[p.Pod.UID] = true
		}
		if r.Workload.Pods <= 10 {
			for _, uid := range uids {
				if !seen[uid] {
					t.Errorf("pod %s not among the inspected ones", uid)
				}
			}
		}
		// Plausible figures: the runtime answers within a second and its lists
		// are far from the limit.
		for _, o := range r.Operations {
			if o.Calls == 0 || o.Errors+o.Timeouts != 0 || o.MinSeconds <= 0 || o.P50Seconds > 1 || o.MaxSeconds > 10 {
				t.Errorf("operation %+v", o)
			}
		}
		for _, l := range r.Lists {
			if l.Error != "" || l.Bytes <= 0 || l.Bytes > 1<<20 {
				t.Errorf("list %+v", l)
			}
		}
		if p := r.Projection; p.SteadySeconds <= 0 || p.SteadySeconds > 1 || p.KubeletWorstSeconds < p.SteadySeconds || p.PlegWorstSeconds > p.KubeletWorstSeconds {
			t.Errorf("projection %+v", p)
		}
	})
}
