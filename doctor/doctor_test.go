// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/sim"
)

// One pod whose ContainerStatus takes 300 ms: the doctor names that pod and
// that operation first, and does not blame the operation everywhere.
func TestSlowPodIsNamedFirst(t *testing.T) {
	// An idle runtime: every status call takes a millisecond.
	idle := sim.LatencyModel{runtime.OpContainerStatus: {P50: time.Millisecond}, runtime.OpPodSandboxStatus: {P50: time.Millisecond}}
	s, client, clk := virtualSim(t, sim.Options{Pods: 20, Containers: 2, Seed: 3, Latency: idle})
	uids := podUIDs(t, client)
	slow := uids[7]
	if err := s.SetFaults(sim.Faults{SlowPod: map[string]time.Duration{slow: 300 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	r := diagnose(t, client, Options{Endpoint: s.Endpoint(), Clock: clk})

	if len(r.Findings) == 0 {
		t.Fatal("no findings")
	}
	first := r.Findings[0]
	if first.ID != "slow-pod" || first.Pod == nil || first.Pod.UID != slow || first.Operation != runtime.OpContainerStatus {
		t.Fatalf("first finding %+v, want slow-pod %s at %s; all: %v", first, slow, runtime.OpContainerStatus, findingIDs(r))
	}
	if !strings.Contains(first.Title, "ContainerStatus") || !strings.Contains(first.Title, first.Pod.Name) {
		t.Errorf("the title does not name the pod and the call: %q", first.Title)
	}
	if f := finding(r, "slow-operation"); f != nil {
		t.Errorf("one slow pod made its operation slow everywhere: %+v", f)
	}
	if r.Verdict != AtRisk {
		t.Errorf("verdict %s, want %s", r.Verdict, AtRisk)
	}
	if in := r.Inspection; in.SlowestOperation != runtime.OpContainerStatus || in.SlowestOperationShare < 0.5 {
		t.Errorf("slowest operation %s with %.2f of the time", in.SlowestOperation, in.SlowestOperationShare)
	}
	if got := r.Inspection.SlowestPods[0]; got.Pod.UID != slow || got.SlowestOperation != runtime.OpContainerStatus || got.SlowestSeconds < 0.3 {
		t.Errorf("slowest pod %+v", got)
	}
	if got := r.Inspection.SlowestContainers[0]; got.Pod.UID != slow || got.Seconds < 0.3 {
		t.Errorf("slowest container %+v", got)
	}
	// Both of its containers take 300 ms, one after the other.
	if p := r.Projection; p.KubeletWorstSeconds < 0.6 || p.PlegWorstSeconds < 0.3 || p.PlegWorstSeconds >= p.KubeletWorstSeconds {
		t.Errorf("projection %+v", p)
	}
}

// 20,000 exited containers: the doctor flags the dead containers and a
// ListContainers answer near the kubelet's 16 MiB limit.
func TestDeadContainersAndListSize(t *testing.T) {
	s, client, clk := virtualSim(t, sim.Options{Pods: 200, Containers: 1, Exited: 100})
	// Counting needs the lists, not every pod's 101 status calls.
	r := diagnose(t, client, Options{Endpoint: s.Endpoint(), Sample: 20, ListSamples: 2, Clock: clk})

	if r.Workload.ContainersExited != 20_000 || r.Workload.ContainersRunning != 200 || r.Workload.Pods != 200 {
		t.Fatalf("workload %+v", r.Workload)
	}
	dead := finding(r, "dead-containers")
	if dead == nil || dead.Severity != Warning || !strings.Contains(dead.Title, "20000 exited containers") {
		t.Fatalf("dead containers not flagged: %+v; findings %v", dead, findingIDs(r))
	}
	size := finding(r, "list-near-limit")
	if size == nil || size.Operation != runtime.OpListContainers {
		t.Fatalf("list size not flagged: %+v; findings %v", size, findingIDs(r))
	}
	l := r.Lists[1]
	if l.Operation != runtime.OpListContainers || l.Items != 20_200 || l.Bytes < msgsize.KubeletMax*3/4 || l.Bytes > msgsize.KubeletMax {
		t.Errorf("containers list %+v", l)
	}
	// Every pod keeps 100 exited attempts of one container, where the
	// kubelet's collector would keep one.
	if r.Workload.BeyondCollection != 200*99 || len(r.Workload.MostExited) != mostExitedShown || r.Workload.MostExited[0].Count != 100 {
		t.Errorf("collection pressure %d, most exited %+v", r.Workload.BeyondCollection, r.Workload.MostExited)
	}
	if r.Verdict != AtRisk {
		t.Errorf("verdict %s, want %s", r.Verdict, AtRisk)
	}
}

// Past the limit the kubelet can never relist: unhealthy. The streamed
// lists still show what the runtime holds.
func TestListOverTheLimit(t *testing.T) {
	s, client, clk := virtualSim(t, sim.Options{Pods: 5, Containers: 2, Faults: sim.Faults{OversizeLists: true}})
	// Lists over 16 MiB take seconds on a busy machine: a budget that
	// leaves no pod out whatever the load.
	r := diagnose(t, client, Options{Endpoint: s.Endpoint(), ListSamples: 1, Budget: time.Hour, Clock: clk})

	if r.Verdict != Unhealthy {
		t.Errorf("verdict %s, want %s", r.Verdict, Unhealthy)
	}
	for _, l := range r.Lists {
		if l.Bytes <= msgsize.KubeletMax {
			t.Errorf("%s measured at %d bytes, want over the limit", l.Operation, l.Bytes)
		}
	}
	if f := finding(r, "list-too-large"); f == nil || f.Severity != Critical {
		t.Fatalf("findings %v", findingIDs(r))
	}
	if r.Workload.Pods != 5 || r.Inspection.Pods != 5 {
		t.Errorf("workload %+v, %d pods inspected", r.Workload, r.Inspection.Pods)
	}
}

// A pod whose status calls hang: unhealthy, the pod named, within the
// budget although each call may wait far longer.
func TestHungPodWithinBudget(t *testing.T) {
	s, client := startSim(t, sim.Options{Pods: 8, Containers: 2})
	hung := podUIDs(t, client)[2]
	if err := s.SetFaults(sim.Faults{HangPod: hung}); err != nil {
		t.Fatal(err)
	}
	const budget = 6 * time.Second
	start := time.Now()
	r := diagnose(t, client, Options{Endpoint: s.Endpoint(), Budget: budget, CallTimeout: time.Minute})
	took := time.Since(start)

	if r.Verdict != Unhealthy {
		t.Errorf("verdict %s, want %s", r.Verdict, Unhealthy)
	}
	f := r.Findings[0]
	if f.ID != "hung-pod" || f.Pod == nil || f.Pod.UID != hung || f.Severity != Critical {
		t.Fatalf("first finding %+v; all %v", f, findingIDs(r))
	}
	// The call timeout is cut to a quarter of the budget, so the hang is
	// seen and every other pod inspected. The bound is functional: without
	// the budget one call would wait a minute.
	if r.Inspection.CallTimeoutSeconds != (budget/4).Seconds() || r.Inspection.Pods != 8 {
		t.Errorf("call timeout %vs, %d pods inspected", r.Inspection.CallTimeoutSeconds, r.Inspection.Pods)
	}
	if took > budget+5*time.Second {
		t.Errorf("diagnosis took %v with a %v budget", took, budget)
	}
	// The kubelet waits 2 m for the hung call in every relist; pleg cuts
	// the pod at its 10 s deadline.
	if p := r.Projection; p.SteadySeconds < 120 || p.PlegWorstSeconds < 10 || p.PlegWorstSeconds > 11 {
		t.Errorf("projection %+v", p)
	}
	if !r.Inspection.SlowestPods[0].Hung || r.Inspection.SlowestPods[0].Pod.UID != hung {
		t.Errorf("slowest pod %+v", r.Inspection.SlowestPods[0])
	}
}

// A runtime that is not there: unhealthy at once, with what to check.
func TestUnreachableRuntime(t *testing.T) {
	endpoint := "unix://" + t.TempDir() + "/nothing.sock"
	r := diagnose(t, dial(t, endpoint), Options{Endpoint: endpoint, Budget: 5 * time.Second})
	if r.Verdict != Unhealthy || r.Verdict.ExitCode() != 2 || r.Runtime.Reachable {
		t.Fatalf("verdict %s, runtime %+v", r.Verdict, r.Runtime)
	}
	if ids := findingIDs(r); !slices.Equal(ids, []string{"runtime-unreachable"}) {
		t.Fatalf("findings %v", ids)
	}
	if !strings.Contains(r.Findings[0].Action, endpoint) || !strings.Contains(r.Runtime.Error, "Unavailable") {
		t.Errorf("finding %+v, error %q", r.Findings[0], r.Runtime.Error)
	}
}

// A runtime that is fine: healthy, and the figures match what it holds.
func TestHealthyRuntime(t *testing.T) {
	s, client, clk := virtualSim(t, sim.Options{Pods: 12, Containers: 3, Exited: 1})
	r := diagnose(t, client, Options{Endpoint: s.Endpoint(), Clock: clk})

	if r.Verdict != Healthy || len(r.Findings) != 0 {
		t.Fatalf("verdict %s, findings %+v", r.Verdict, r.Findings)
	}
	if r.Runtime.Name != sim.RuntimeName || r.Runtime.APIVersion != "v1" || len(r.Runtime.Conditions) != 2 {
		t.Errorf("runtime %+v", r.Runtime)
	}
	w := r.Workload
	if w.Pods != 12 || w.SandboxesReady != 12 || w.ContainersRunning != 36 || w.ContainersExited != 12 || w.BeyondCollection != 0 {
		t.Errorf("workload %+v", w)
	}
	if r.Lists[0].Items != 12 || r.Lists[1].Items != 48 {
		t.Errorf("lists %+v", r.Lists)
	}
	for _, p := range []Probe{r.Support.StreamPodSandboxes, r.Support.StreamContainers, r.Support.ContainerEvents} {
		if p.Availability != Supported {
			t.Errorf("support %+v", r.Support)
		}
	}
	calls := make(map[string]int)
	for _, o := range r.Operations {
		calls[o.Name] = o.Calls
		if o.Errors+o.Timeouts != 0 || o.P50Seconds > o.P99Seconds || o.P99Seconds > o.MaxSeconds || o.MinSeconds > o.P50Seconds {
			t.Errorf("operation %+v", o)
		}
	}
	// As the kubelet: per pod, its sandboxes listed and each one's
	// status, its containers listed and each one's status.
	want := map[string]int{
		runtime.OpVersion: 1, runtime.OpStatus: 1, runtime.OpListPodSandbox: DefaultListSamples, runtime.OpListContainers: DefaultListSamples,
		opStreamPodSandboxes: 1, opStreamContainers: 1,
		opListPodSandboxByPod: 12, runtime.OpPodSandboxStatus: 12, opListContainersByPod: 12, runtime.OpContainerStatus: 48,
	}
	for op, n := range want {
		if calls[op] != n {
			t.Errorf("%s called %d times, want %d", op, calls[op], n)
		}
	}
	if r.Inspection.Pods != 12 || r.Projection.Extrapolated || r.Projection.Pods != 12 {
		t.Errorf("inspection %+v, projection %+v", r.Inspection, r.Projection)
	}
}

// Runtimes without the event stream, either way they say it.
func TestEventStreamSupport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   sim.Options
		detail string
	}{
		{"containerd 1.x", sim.Options{Pods: 1, Containers: 1, Faults: sim.Faults{EventsUnimplemented: true}}, "Unimplemented"},
		{"CRI-O without pod events", sim.Options{Pods: 1, Containers: 1, Events: sim.EventsOff}, "the stream ends at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, client, clk := virtualSim(t, tc.opts)
			r := diagnose(t, client, Options{Endpoint: s.Endpoint(), Clock: clk})
			if p := r.Support.ContainerEvents; p.Availability != Unsupported || p.Detail != tc.detail {
				t.Errorf("events %+v", p)
			}
			if f := finding(r, "no-event-stream"); f == nil || f.Severity != Info || r.Verdict != Healthy {
				t.Errorf("verdict %s, findings %v", r.Verdict, findingIDs(r))
			}
		})
	}
}

// With --sample, pods are picked across the node and the projection
// scaled to all of them.
func TestSample(t *testing.T) {
	s, client, clk := virtualSim(t, sim.Options{Pods: 10, Containers: 1})
	r := diagnose(t, client, Options{Endpoint: s.Endpoint(), Sample: 4, Clock: clk})
	if r.Inspection.Pods != 4 || r.Inspection.Planned != 4 || !r.Projection.Extrapolated {
		t.Fatalf("inspection %+v, projection %+v", r.Inspection, r.Projection)
	}
	if f := finding(r, "partial-inspection"); f == nil || f.Severity != Info || !strings.Contains(f.Title, "4 of 10") {
		t.Errorf("findings %v", findingIDs(r))
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{{Budget: -time.Second}, {Sample: -1}, {Concurrency: -2}, {RelistThreshold: -1}} {
		if _, err := Diagnose(t.Context(), nil, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
