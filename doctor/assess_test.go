// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/runtime"
)

const ms = time.Millisecond

// fakePod is an inspected pod whose container status calls took the given
// times, after a quick sandbox status and per-pod lists.
func fakePod(name string, statuses ...time.Duration) *podResult {
	p := &podResult{pod: PodRef{UID: "uid-" + name, Name: name, Namespace: "default"}}
	p.calls = append(p.calls,
		call{op: opListPodSandboxByPod, took: ms},
		call{op: runtime.OpPodSandboxStatus, target: "sb-" + name, took: ms},
		call{op: opListContainersByPod, took: ms})
	for i, d := range statuses {
		p.calls = append(p.calls, call{op: runtime.OpContainerStatus, target: fmt.Sprintf("c%d", i), id: fmt.Sprintf("%s-%d", name, i), took: d})
	}
	return p
}

// hungPod is a pod whose first container status got no answer.
func hungPod(name string) *podResult {
	p := fakePod(name)
	p.calls = append(p.calls, call{op: runtime.OpContainerStatus, target: "c0", id: name + "-0", took: 10 * time.Second, hung: true, timeout: 10 * time.Second, err: fmt.Errorf("deadline")})
	return p
}

func fastPods(n int) []*podResult {
	var pods []*podResult
	for i := range n {
		pods = append(pods, fakePod(fmt.Sprintf("fast-%02d", i), ms, ms))
	}
	return pods
}

// fakeReport is a healthy node's report holding pods.
func fakeReport(pods ...*podResult) *Report {
	return &Report{
		Endpoint: "unix:///run/containerd/containerd.sock",
		Runtime: RuntimeInfo{Reachable: true, Name: "containerd", Version: "v2.2.1", APIVersion: "v1",
			Conditions: []Condition{{Type: "RuntimeReady", Status: true}, {Type: "NetworkReady", Status: true}}},
		Support: Support{StreamPodSandboxes: Probe{Availability: Supported}, StreamContainers: Probe{Availability: Supported}, ContainerEvents: Probe{Availability: Supported}},
		Operations: []Operation{
			{Name: runtime.OpListPodSandbox, Calls: 5, P50Seconds: 0.001, P99Seconds: 0.002, MaxSeconds: 0.002},
			{Name: runtime.OpListContainers, Calls: 5, P50Seconds: 0.002, P99Seconds: 0.003, MaxSeconds: 0.003},
		},
		Lists: []List{
			{Operation: runtime.OpListPodSandbox, Items: len(pods), Bytes: 300 * len(pods), LimitBytes: msgsize.KubeletMax},
			{Operation: runtime.OpListContainers, Items: 2 * len(pods), Bytes: 800 * len(pods), LimitBytes: msgsize.KubeletMax},
		},
		Workload:   Workload{Pods: len(pods), SandboxesReady: len(pods), ContainersRunning: 2 * len(pods)},
		Inspection: Inspection{Pods: len(pods), Planned: len(pods), Concurrency: 1, CallTimeoutSeconds: 10},
		Projection: Projection{PeriodSeconds: 1, ThresholdSeconds: 180, AlertSeconds: 10, Pods: len(pods), SteadySeconds: 0.003,
			KubeletWorstSeconds: 0.1, PlegWorstSeconds: 0.01, PlegConcurrency: 32, RuntimeRequestTimeoutSeconds: 120, PlegInspectTimeoutSeconds: 10},
		pods: pods,
	}
}

func TestAssess(t *testing.T) {
	for _, tc := range []struct {
		name    string
		report  func() *Report
		want    []string
		verdict Verdict
		check   func(t *testing.T, r *Report)
	}{
		{
			name:    "a healthy node",
			report:  func() *Report { return fakeReport(fastPods(20)...) },
			verdict: Healthy,
		},
		{
			name: "runtime not ready",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Runtime.Conditions[0] = Condition{Type: "RuntimeReady", Reason: "ShimDown", Message: "shim gone"}
				return r
			},
			want: []string{"runtime-not-ready"}, verdict: Unhealthy,
		},
		{
			name: "network not ready",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Runtime.Conditions[1] = Condition{Type: "NetworkReady", Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"}
				return r
			},
			want: []string{"network-not-ready"}, verdict: Unhealthy,
		},
		{
			name: "one slow pod among fast ones is the pod's problem, not the operation's",
			report: func() *Report {
				return fakeReport(append(fastPods(20), fakePod("slow", 300*ms, 300*ms))...)
			},
			want: []string{"slow-pod"}, verdict: AtRisk,
			check: func(t *testing.T, r *Report) {
				f := r.Findings[0]
				if f.Pod.Name != "slow" || f.Operation != runtime.OpContainerStatus || !strings.Contains(f.Title, `container "c0"`) {
					t.Errorf("finding %+v", f)
				}
			},
		},
		{
			name: "every pod slow is the operation's problem",
			report: func() *Report {
				var pods []*podResult
				for i := range 20 {
					pods = append(pods, fakePod(fmt.Sprintf("p%02d", i), 150*ms, 160*ms))
				}
				return fakeReport(pods...)
			},
			want: []string{"slow-operation"}, verdict: AtRisk,
			check: func(t *testing.T, r *Report) {
				if r.Findings[0].Operation != runtime.OpContainerStatus {
					t.Errorf("finding %+v", r.Findings[0])
				}
			},
		},
		{
			name: "a slow whole-node list",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Operations[1].P50Seconds, r.Operations[1].P99Seconds = 0.6, 0.9
				return r
			},
			want: []string{"slow-operation"}, verdict: AtRisk,
		},
		{
			name: "a hung pod outranks a slow one",
			report: func() *Report {
				return fakeReport(append(fastPods(20), fakePod("slow", 400*ms), hungPod("stuck"))...)
			},
			want: []string{"hung-pod", "slow-pod"}, verdict: Unhealthy,
			check: func(t *testing.T, r *Report) {
				if f := r.Findings[0]; f.Pod.Name != "stuck" || !strings.Contains(f.Action, "crictl inspect stuck-0") {
					t.Errorf("finding %+v", f)
				}
			},
		},
		{
			name: "many hung pods: five named, the rest counted",
			report: func() *Report {
				pods := fastPods(3)
				for i := range 7 {
					pods = append(pods, hungPod(fmt.Sprintf("stuck-%d", i)))
				}
				return fakeReport(pods...)
			},
			want:    []string{"hung-pod", "hung-pod", "hung-pod", "hung-pod", "hung-pod", "hung-pod"},
			verdict: Unhealthy,
			check: func(t *testing.T, r *Report) {
				if last := r.Findings[5]; last.Pod != nil || !strings.HasPrefix(last.Title, "2 more pods") {
					t.Errorf("last finding %+v", last)
				}
			},
		},
		{
			name: "relist past the threshold with nothing changed",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Projection.SteadySeconds = 200
				return r
			},
			want: []string{"relist-over-threshold"}, verdict: Unhealthy,
		},
		{
			name: "relist where the stock alert fires",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Projection.SteadySeconds = 12
				return r
			},
			want: []string{"relist-slow"}, verdict: AtRisk,
		},
		{
			name: "relist longer than its period",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Projection.SteadySeconds = 1.5
				return r
			},
			want: []string{"relist-slow"}, verdict: AtRisk,
		},
		{
			name: "every pod changed takes past the threshold",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Projection.KubeletWorstSeconds = 200
				return r
			},
			want: []string{"too-many-pods"}, verdict: AtRisk,
		},
		{
			name: "every pod changed takes long, below the threshold",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Projection.KubeletWorstSeconds = 30
				return r
			},
			want: []string{"too-many-pods"}, verdict: Healthy,
		},
		{
			name: "a list over the limit",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Lists[1].Bytes, r.Lists[1].Error = 17<<20, "ResourceExhausted: grpc: received message larger than max"
				return r
			},
			want: []string{"list-too-large"}, verdict: Unhealthy,
		},
		{
			name: "a list near the limit, the runtime without streaming",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Lists[1].Bytes = 13 << 20
				r.Support.StreamContainers = Probe{Availability: Unsupported, Detail: "Unimplemented"}
				return r
			},
			want: []string{"list-near-limit", "no-streaming-lists"}, verdict: AtRisk,
		},
		{
			name: "CRI-O: an event stream that does not tell pod removals",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Runtime.Name = "cri-o"
				r.Support.PodRemovalEvents = Probe{Availability: Unsupported, Detail: "known of CRI-O: no event when a pod is removed"}
				return r
			},
			want: []string{"untold-pod-removals"}, verdict: Healthy,
		},
		{
			name: "a failing list",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Lists[0].Error = "no answer within 10s"
				return r
			},
			want: []string{"list-failed"}, verdict: Unhealthy,
		},
		{
			name: "a list failing now and then",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Operations[1].Errors = 2
				return r
			},
			want: []string{"list-flaky"}, verdict: AtRisk,
		},
		{
			name: "a thousand dead containers",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Workload.ContainersExited, r.Workload.BeyondCollection = 1000, 990
				return r
			},
			want: []string{"dead-containers"}, verdict: AtRisk,
		},
		{
			name: "dead containers piling up",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Workload.ContainersExited, r.Workload.BeyondCollection = 300, 150
				return r
			},
			want: []string{"dead-containers"}, verdict: Healthy,
		},
		{
			name: "pods whose inspection fails",
			report: func() *Report {
				p := fakePod("broken", ms)
				p.calls[3].err = fmt.Errorf("boom")
				return fakeReport(append(fastPods(3), p)...)
			},
			want: []string{"inspection-errors"}, verdict: AtRisk,
		},
		{
			name: "an unhealthy pleg daemon",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Daemon = &Daemon{URL: "http://127.0.0.1:9847", Health: "PLEG is not healthy: pleg was last seen active 3m10s ago; threshold is 3m0s", RelistRunningSeconds: 190}
				return r
			},
			want: []string{"daemon-unhealthy"}, verdict: Unhealthy,
		},
		{
			name: "a slow pleg daemon",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Daemon = &Daemon{URL: "http://127.0.0.1:9847", Healthy: true, Health: "ok", Relists: 100, RelistP99Seconds: 12}
				return r
			},
			want: []string{"daemon-relist-slow"}, verdict: AtRisk,
		},
		{
			name: "an unreadable pleg daemon",
			report: func() *Report {
				r := fakeReport(fastPods(3)...)
				r.Daemon = &Daemon{URL: "http://127.0.0.1:9847", Error: "connection refused"}
				return r
			},
			want: []string{"daemon-unreadable"}, verdict: AtRisk,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.report()
			assess(r)
			if got := findingIDs(r); !slices.Equal(got, tc.want) {
				t.Fatalf("findings %v, want %v", got, tc.want)
			}
			if r.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s", r.Verdict, tc.verdict)
			}
			for _, f := range r.Findings {
				if f.Title == "" || len(f.Evidence) == 0 || f.Action == "" {
					t.Errorf("finding without title, evidence or action: %+v", f)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestVerdictExitCodes(t *testing.T) {
	for v, want := range map[Verdict]int{Healthy: 0, AtRisk: 1, Unhealthy: 2} {
		if got := v.ExitCode(); got != want {
			t.Errorf("%s exits %d, want %d", v, got, want)
		}
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0.5: 50, 0.9: 90, 0.99: 99, 1: 100, 0: 1} {
		if got := quantile(d, q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := quantile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("quantile of one = %v", got)
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of none = %v", got)
	}
}
