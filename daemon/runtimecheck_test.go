// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtimecheck"
)

func TestUnanswered(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name     string
		status   pleg.Status
		inFlight []flightrec.Call
		check    runtimecheck.State
		want     time.Time
	}{
		{name: "answering"},
		{name: "Status unanswered", check: runtimecheck.State{UnansweredSince: at(5), Unanswered: "its Status"}, want: at(5)},
		{name: "lists failing", status: pleg.Status{ListFailingSince: at(3)}, check: runtimecheck.State{UnansweredSince: at(5)}, want: at(3)},
		{
			name: "a whole-node list in flight, older than the Status call",
			inFlight: []flightrec.Call{
				{Op: runtime.OpContainerStatus, ID: "c1", Start: at(1)},
				{Op: runtime.OpListContainers, ID: "", Start: at(2)},
				{Op: runtime.OpListPodSandbox, ID: "", Start: at(4)},
			},
			check: runtimecheck.State{UnansweredSince: at(5)},
			want:  at(2),
		},
		{
			name: "a pod's calls in flight are the pod's, not the runtime's",
			inFlight: []flightrec.Call{
				{Op: runtime.OpContainerStatus, ID: "c1", Start: at(1)},
				{Op: runtime.OpListContainers, ID: "pod=u1", Start: at(1)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := unanswered(tt.status, tt.inFlight, tt.check); !got.Equal(tt.want) {
				t.Errorf("unanswered since %v, want %v", got, tt.want)
			}
		})
	}
}
