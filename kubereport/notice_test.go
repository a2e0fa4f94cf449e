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
)

// told is an event as the tests compare it: "Kind/name Type Reason".
func told(events []event) []string {
	var out []string
	for _, e := range events {
		name := e.regarding.Name
		if e.regarding.Namespace != "" {
			name = e.regarding.Namespace + "/" + name
		}
		out = append(out, fmt.Sprintf("%s/%s %s %s", e.regarding.Kind, name, e.eventType(), e.reason))
	}
	return out
}

func TestNotices(t *testing.T) {
	down := status.Error(codes.Unavailable, "connection refused")
	hung := pleg.PodFailure{UID: "u1", Name: "web", Namespace: "shop", Since: t0, Deadline: true, Err: errors.New("timed out")}
	failing := pleg.PodFailure{UID: "u2", Name: "db", Namespace: "shop", Since: t0, Err: errors.New("not found")}
	nameless := pleg.PodFailure{UID: "u3", Since: t0, Deadline: true, Err: errors.New("timed out")}

	type step struct {
		after  time.Duration // since t0
		status func(*pleg.Status)
		want   []string
	}
	tests := []struct {
		name  string
		mode  pleg.Mode
		steps []step
	}{
		{
			name: "the runtime stops answering, then comes back",
			mode: pleg.ModeGeneric,
			steps: []step{
				{after: 0, status: func(s *pleg.Status) { s.ListFailingSince, s.ListError = t0, down }},
				{after: 5 * time.Second, status: func(s *pleg.Status) { s.ListFailingSince, s.ListError = t0, down }},
				{after: 10 * time.Second, status: func(s *pleg.Status) { s.ListFailingSince, s.ListError = t0, down },
					want: []string{"Node/node-1 Warning RuntimeUnreachable"}},
				{after: 20 * time.Second, status: func(s *pleg.Status) { s.ListFailingSince, s.ListError = t0, down }},
				{after: 21 * time.Second, want: []string{"Node/node-1 Normal RelistRecovered"}},
				{after: 22 * time.Second},
			},
		},
		{
			name: "a short failure says nothing",
			mode: pleg.ModeGeneric,
			steps: []step{
				{after: 0, status: func(s *pleg.Status) { s.ListFailingSince, s.ListError = t0, down }},
				{after: 3 * time.Second},
			},
		},
		{
			name: "the event stream falls back and returns",
			mode: pleg.ModeAuto,
			steps: []step{
				{after: 0}, // not yet connected: no fallback
				{after: time.Second, status: func(s *pleg.Status) { s.StreamConnected = true }},
				{after: 2 * time.Second, status: func(s *pleg.Status) { s.StreamError = errors.New("EOF") },
					want: []string{"Node/node-1 Warning EventStreamLost"}},
				{after: 3 * time.Second},
				{after: 4 * time.Second, status: func(s *pleg.Status) { s.StreamConnected = true },
					want: []string{"Node/node-1 Normal EventStreamRestored"}},
				{after: 5 * time.Second, status: func(s *pleg.Status) { s.StreamConnected = true }},
			},
		},
		{
			name: "a runtime without a stream, in auto mode",
			mode: pleg.ModeAuto,
			steps: []step{
				{after: 0, status: func(s *pleg.Status) { s.NoStream = true }, want: []string{"Node/node-1 Normal EventStreamUnsupported"}},
				{after: time.Second, status: func(s *pleg.Status) { s.NoStream = true }},
			},
		},
		{
			name: "a runtime without a stream, in evented mode",
			mode: pleg.ModeEvented,
			steps: []step{
				{after: 0, status: func(s *pleg.Status) { s.NoStream = true }, want: []string{"Node/node-1 Warning EventStreamUnsupported"}},
			},
		},
		{
			name: "generic mode says nothing of the stream",
			mode: pleg.ModeGeneric,
			steps: []step{
				{after: 0, status: func(s *pleg.Status) { s.NoStream = true }},
			},
		},
		{
			name: "pods: a hung one at once, a failing one after the grace period, each once",
			mode: pleg.ModeGeneric,
			steps: []step{
				{after: time.Second, status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{hung, failing, nameless} },
					want: []string{"Pod/shop/web Warning PodStatusHung"}},
				{after: 10 * time.Second, status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{hung, failing, nameless} },
					want: []string{"Pod/shop/db Warning PodInspectionFailing"}},
				{after: 11 * time.Second, status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{hung, failing} }},
				// Recovered, then hung again: told again.
				{after: 12 * time.Second, status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{failing} }},
				{after: 13 * time.Second, status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{failing, hung} },
					want: []string{"Pod/shop/web Warning PodStatusHung"}},
			},
		},
		{
			name: "a hung pod whose next try fails otherwise: the same problem",
			mode: pleg.ModeGeneric,
			steps: []step{
				{after: time.Second, status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{hung} },
					want: []string{"Pod/shop/web Warning PodStatusHung"}},
				{after: 20 * time.Second, status: func(s *pleg.Status) {
					f := hung
					f.Deadline, f.Err = false, errors.New("canceled")
					s.FailingPods = []pleg.PodFailure{f}
				}},
			},
		},
		{
			name: "a failing pod that starts to hang",
			mode: pleg.ModeGeneric,
			steps: []step{
				{after: 10 * time.Second, status: func(s *pleg.Status) { s.FailingPods = []pleg.PodFailure{failing} },
					want: []string{"Pod/shop/db Warning PodInspectionFailing"}},
				{after: 11 * time.Second, status: func(s *pleg.Status) {
					f := failing
					f.Deadline = true
					s.FailingPods = []pleg.PodFailure{f}
				}, want: []string{"Pod/shop/db Warning PodStatusHung"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNotices("node-1", DefaultGrace)
			for i, s := range tt.steps {
				st := healthyStatus()
				st.Mode = tt.mode
				if s.status != nil {
					s.status(&st)
				}
				got := told(n.next(st, t0.Add(s.after)))
				if strings.Join(got, "; ") != strings.Join(s.want, "; ") {
					t.Errorf("step %d (+%v): events %q, want %q", i, s.after, got, s.want)
				}
			}
		})
	}
}

func TestNoticeReferences(t *testing.T) {
	n := newNotices("node-1", DefaultGrace)
	st := healthyStatus()
	st.FailingPods = []pleg.PodFailure{{UID: "u1", Name: "web", Namespace: "shop", Since: t0, Deadline: true, Err: errors.New("timed out")}}
	st.ListFailingSince, st.ListError = t0.Add(-time.Minute), errors.New("boom")
	events := n.next(st, t0)
	if len(events) != 2 {
		t.Fatalf("events %q", told(events))
	}
	node, pod := events[0], events[1]
	// kubectl describe node finds the node's events by a UID equal to its
	// name; kubectl describe pod by the pod's UID.
	if r := node.regarding; r.Kind != "Node" || r.Name != "node-1" || r.UID != "node-1" || r.Namespace != "" || r.APIVersion != "v1" {
		t.Errorf("node reference %+v", r)
	}
	if r := pod.regarding; r.Kind != "Pod" || r.Name != "web" || r.Namespace != "shop" || r.UID != "u1" || r.APIVersion != "v1" {
		t.Errorf("pod reference %+v", r)
	}
	if node.action != actionRelist || pod.action != actionInspect {
		t.Errorf("actions %q %q", node.action, pod.action)
	}
	if !strings.Contains(pod.note, "(since 2026-11-23T12:00:00Z): timed out") {
		t.Errorf("pod note %q", pod.note)
	}
}
