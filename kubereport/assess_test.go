// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubeletpleg"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtimecheck"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func healthyStatus() pleg.Status {
	return pleg.Status{
		Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute,
		LastRelist: t0.Add(-time.Second),
	}
}

func TestAssess(t *testing.T) {
	down := fmt.Errorf("listing containers: %w", status.Error(codes.Unavailable, "connection refused"))
	tooBig := status.Error(codes.ResourceExhausted, "grpc: received message larger than max (70000000 vs. 67108864)")
	hung := pleg.PodFailure{UID: "u1", Name: "web", Namespace: "shop", Since: t0.Add(-20 * time.Second), Deadline: true, Err: errors.New("pod inspection timed out")}
	tests := []struct {
		name   string
		status func(*pleg.Status)
		sizes  runtime.ListSizes
		// runtime is the runtime check's state.
		runtime runtimecheck.State
		// kubelet is the kubelet's own PLEG, as last read.
		kubelet *kubeletpleg.Reading
		known   bool
		reason  string
		// message holds these, in order, and none of without
		message []string
		without []string
	}{
		{
			name:   "before the first relist",
			status: func(s *pleg.Status) { s.LastRelist = time.Time{} },
		},
		{
			name:    "healthy",
			known:   true,
			reason:  ReasonHealthy,
			message: []string{"relisting keeps within its threshold"},
		},
		{
			name: "the runtime is down, but not yet for the grace period",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = t0.Add(-9*time.Second), down
			},
			known: true, reason: ReasonHealthy,
		},
		{
			name: "the runtime is down",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = t0.Add(-10*time.Second), down
			},
			known: true, reason: ReasonRuntimeUnreachable,
			message: []string{"the container runtime does not answer since 2026-11-23T11:59:50Z: listing containers: rpc error: code = Unavailable desc = connection refused"},
		},
		{
			name: "the runtime's list hangs to its deadline",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = t0.Add(-time.Minute), status.Error(codes.DeadlineExceeded, "context deadline exceeded")
			},
			known: true, reason: ReasonRuntimeUnreachable,
		},
		{
			name: "a list too large",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = t0.Add(-time.Minute), tooBig
			},
			known: true, reason: ReasonListTooLarge, message: []string{"larger than the client accepts", "70000000"},
		},
		{
			name: "another list error",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = t0.Add(-time.Minute), errors.New("boom\nwith a second line")
			},
			known: true, reason: ReasonRelistFailing, message: []string{"the runtime's lists fail since 2026-11-23T11:59:00Z: boom with a second line"},
		},
		{
			name:    "the runtime's Status unanswered for runtimecheck.Unanswered",
			runtime: runtimecheck.State{UnansweredSince: t0.Add(-runtimecheck.Unanswered), Unanswered: "its Status", InFlight: true},
			known:   true, reason: ReasonRuntimeUnreachable,
			message: []string{"has not answered its Status since 2026-11-23T11:59:40Z", "the kubelet's runtime check"},
		},
		{
			name:    "the runtime's Status unanswered for less",
			runtime: runtimecheck.State{UnansweredSince: t0.Add(-runtimecheck.Unanswered + time.Second), InFlight: true},
			known:   true, reason: ReasonHealthy,
		},
		{
			name:    "the runtime's Status failing, with its error",
			runtime: runtimecheck.State{UnansweredSince: t0.Add(-time.Minute), Err: status.Error(codes.DeadlineExceeded, "context deadline exceeded")},
			known:   true, reason: ReasonRuntimeUnreachable,
			message: []string{"since 2026-11-23T11:59:00Z: rpc error: code = DeadlineExceeded"},
		},
		{
			name: "lists failing and Status unanswered: one cause, named once",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = t0.Add(-time.Minute), down
			},
			runtime: runtimecheck.State{UnansweredSince: t0.Add(-time.Minute), Err: down},
			known:   true, reason: ReasonRuntimeUnreachable,
			message: []string{"does not answer since"},
			without: []string{"also"},
		},
		{
			name:    "the runtime answers slowly",
			runtime: runtimecheck.State{Latency: 3500 * time.Millisecond},
			known:   true, reason: ReasonRuntimeSlow,
			message: []string{"answers its Status in 3.5s, typically", "30 s without an answer"},
		},
		{
			name:    "the runtime answers a little slowly",
			runtime: runtimecheck.State{Latency: runtimecheck.Slow - time.Millisecond},
			known:   true, reason: ReasonHealthy,
		},
		{
			name:    "the kubelet's PLEG behind while pleg's relists succeed",
			kubelet: &kubeletpleg.Reading{LastSeen: t0.Add(-100 * time.Second)},
			known:   true, reason: ReasonKubeletRelistBehind,
			message: []string{"the kubelet's own PLEG was last seen active 1m40s ago", "the kubelet itself is starved or stuck",
				"PLEG not healthy at 3m0s"},
		},
		{
			name:    "an EventedPLEG kubelet's generic relist 5 minutes old",
			kubelet: &kubeletpleg.Reading{LastSeen: t0.Add(-301 * time.Second), Evented: true},
			known:   true, reason: ReasonHealthy,
		},
		{
			name:    "an EventedPLEG kubelet's PLEG behind",
			kubelet: &kubeletpleg.Reading{LastSeen: t0.Add(-8 * time.Minute), Evented: true},
			known:   true, reason: ReasonKubeletRelistBehind,
			message: []string{"last seen active 8m0s ago", "PLEG not healthy at 10m0s"},
		},
		{
			name:    "the kubelet's PLEG seen within half its threshold",
			kubelet: &kubeletpleg.Reading{LastSeen: t0.Add(-89 * time.Second)},
			known:   true, reason: ReasonHealthy,
		},
		{
			name: "the kubelet's PLEG behind with pleg's: the runtime is named first",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError, s.LastRelist = t0.Add(-2*time.Minute), down, t0.Add(-2*time.Minute)
			},
			kubelet: &kubeletpleg.Reading{LastSeen: t0.Add(-2 * time.Minute)},
			known:   true, reason: ReasonRuntimeUnreachable,
			message: []string{"(also RelistNearThreshold, KubeletRelistBehind)"},
			without: []string{"starved or stuck"},
		},
		{
			name: "the runtime says it is not ready",
			runtime: runtimecheck.State{Conditions: []runtimecheck.Condition{
				{Type: "RuntimeReady", Status: true},
				{Type: "NetworkReady", Status: false, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
			}},
			known: true, reason: ReasonRuntimeNotReady,
			message: []string{`NetworkReady=false, reason "NetworkPluginNotReady": cni config uninitialized`},
		},
		{
			name:   "a relist over half the threshold",
			status: func(s *pleg.Status) { s.LastRelist = t0.Add(-90 * time.Second) },
			known:  true, reason: ReasonRelistNearThreshold,
			message: []string{"no relist has succeeded since 2026-11-23T11:58:30Z", "over half the 3m0s threshold"},
		},
		{
			name:   "a relist under half the threshold",
			status: func(s *pleg.Status) { s.LastRelist = t0.Add(-89 * time.Second) },
			known:  true, reason: ReasonHealthy,
		},
		{
			name: "a relist running long",
			status: func(s *pleg.Status) {
				s.LastRelist, s.RelistInFlightSince = t0.Add(-100*time.Second), t0.Add(-99*time.Second)
			},
			known: true, reason: ReasonRelistNearThreshold,
			message: []string{"since 2026-11-23T11:58:20Z; a relist is running since 2026-11-23T11:58:21Z"},
		},
		{
			name:   "the first relist running long",
			status: func(s *pleg.Status) { s.LastRelist, s.RelistInFlightSince = time.Time{}, t0.Add(-2*time.Minute) },
			known:  true, reason: ReasonRelistNearThreshold,
			message: []string{"no relist has succeeded yet; a relist is running since 2026-11-23T11:58:00Z"},
		},
		{
			name:   "past the threshold",
			status: func(s *pleg.Status) { s.LastRelist = t0.Add(-3 * time.Minute) },
			known:  true, reason: ReasonRelistOverThreshold,
			message: []string{"past the 3m0s threshold: the kubelet's PLEG is unhealthy"},
		},
		{
			name:   "a hung pod",
			status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{hung} },
			known:  true, reason: ReasonPodStatusHung,
			message: []string{"pod shop/web: its status calls do not answer within the inspection deadline since 2026-11-23T11:59:40Z"},
		},
		{
			name: "hung pods",
			status: func(s *pleg.Status) {
				other := hung
				other.UID, other.Name = "u2", "db"
				failing := hung
				failing.UID, failing.Deadline = "u3", false
				s.FailingPods = []pleg.PodFailure{hung, failing, other}
			},
			known: true, reason: ReasonPodStatusHung,
			message: []string{"pod shop/web", "; and 1 more pod;"},
		},
		{
			name: "a pod whose status call passed the client's own deadline",
			status: func(s *pleg.Status) {
				f := hung
				f.Deadline, f.Err = false, fmt.Errorf("status of sandbox s1: %w", status.Error(codes.DeadlineExceeded, "context deadline exceeded"))
				s.FailingPods = []pleg.PodFailure{f}
			},
			known: true, reason: ReasonPodStatusHung,
		},
		{
			name: "a pod that fails otherwise does not degrade the node",
			status: func(s *pleg.Status) {
				failing := hung
				failing.Deadline = false
				s.FailingPods = []pleg.PodFailure{failing}
			},
			known: true, reason: ReasonHealthy,
		},
		{
			name:    "a list near the kubelet's limit",
			sizes:   sizes(1<<20, 1<<20, 13<<20, 64<<20),
			known:   true,
			reason:  ReasonListNearSizeLimit,
			message: []string{"the ListContainers answer is 13.0 MiB, 81% of the kubelet's 16.0 MiB limit"},
		},
		{
			name:    "a list near the client's own, lower, limit",
			sizes:   sizes(7<<20, 7<<20, 1<<20, 8<<20),
			known:   true,
			reason:  ReasonListNearSizeLimit,
			message: []string{"the ListPodSandbox answer is 7.0 MiB, 87% of pleg's receive 8.0 MiB limit"},
		},
		{
			name:    "a streamed list in small messages, over what the kubelet takes in one",
			sizes:   sizes(1<<20, 1<<20, 20<<20, 64<<20, 4<<20),
			known:   true,
			reason:  ReasonListNearSizeLimit,
			message: []string{"the ListContainers answer is 20.0 MiB, 125% of the kubelet's 16.0 MiB limit"},
		},
		{
			name:   "a list far from the limit",
			sizes:  sizes(1<<20, 11<<20, 11<<20, 64<<20),
			known:  true,
			reason: ReasonHealthy,
		},
		{
			name: "several causes: the first named, the others listed",
			status: func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = t0.Add(-2*time.Minute), down
				s.LastRelist = t0.Add(-2 * time.Minute)
				s.FailingPods = []pleg.PodFailure{hung}
			},
			known: true, reason: ReasonRuntimeUnreachable,
			message: []string{"does not answer", "(also RelistNearThreshold, PodStatusHung)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := healthyStatus()
			if tt.status != nil {
				tt.status(&st)
			}
			o := observed{status: st, runtime: tt.runtime, sizes: tt.sizes}
			if tt.kubelet != nil {
				o.kubelet, o.kubeletRead = *tt.kubelet, true
			}
			v, known := assess(o, t0, DefaultGrace)
			if known != tt.known {
				t.Fatalf("known = %v, want %v (%+v)", known, tt.known, v)
			}
			if !known {
				return
			}
			if v.reason != tt.reason || v.degraded != (tt.reason != ReasonHealthy) {
				t.Errorf("verdict %+v, want reason %s", v, tt.reason)
			}
			for _, w := range tt.without {
				if strings.Contains(v.message, w) {
					t.Errorf("message %q holds %q", v.message, w)
				}
			}
			rest := v.message
			for _, part := range tt.message {
				i := strings.Index(rest, part)
				if i < 0 {
					t.Fatalf("message %q: want %q (in order)", v.message, part)
				}
				rest = rest[i+len(part):]
			}
			if strings.Contains(v.message, "\n") {
				t.Errorf("message %q: want one line", v.message)
			}
		})
	}
}

func TestOneLineBoundsErrors(t *testing.T) {
	long := errors.New(strings.Repeat("é", 400))
	s := oneLine(long)
	if len(s) > maxErrLen+3 || !strings.HasSuffix(s, "...") || !strings.HasPrefix(s, "éé") {
		t.Errorf("oneLine of a long error = %d bytes %q", len(s), s)
	}
	if !strings.Contains(oneLine(long), "é...") || strings.ContainsRune(s, '\uFFFD') {
		t.Errorf("oneLine cut a character in two: %q", s)
	}
	if oneLine(nil) != "unknown error" {
		t.Errorf("oneLine(nil) = %q", oneLine(nil))
	}
}

// sizes are list sizes of sandboxes' and containers' answers against limit,
// each answer one message unless a largest message is given.
func sizes(sandboxes, sandboxesLargest, containers, limit int, containersLargest ...int) runtime.ListSizes {
	largest := containers
	if len(containersLargest) > 0 {
		largest = containersLargest[0]
	}
	return runtime.ListSizes{
		PodSandboxes: runtime.ListSize{Bytes: sandboxes, LargestMessageBytes: sandboxesLargest},
		Containers:   runtime.ListSize{Bytes: containers, LargestMessageBytes: largest},
		LimitBytes:   limit,
	}
}
