// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// The wait for the backlog ends at the first event sent since the stream
// connected, or at a quiet: since the stream connected, or, for a patient
// wait, after the backlog's last event only, so that a backlog a loaded
// runtime begins late is still waited for.
func TestBacklogWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		patient bool
		// backlog are when events sent before the stream connected come,
		// after it connected.
		backlog []time.Duration
		// live is when an event sent since the stream connected comes; 0
		// for none.
		live time.Duration
		want time.Duration
	}{
		{name: "no backlog", want: BacklogQuiet},
		{name: "no backlog, patient", patient: true, want: firstAttemptWait},
		{name: "a backlog", backlog: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, want: 200*time.Millisecond + BacklogQuiet},
		{name: "a late backlog", backlog: []time.Duration{400 * time.Millisecond}, want: BacklogQuiet},
		{
			name: "a late backlog, patient", patient: true,
			backlog: []time.Duration{400 * time.Millisecond, 500 * time.Millisecond},
			want:    500*time.Millisecond + BacklogQuiet,
		},
		{name: "a live event", patient: true, backlog: []time.Duration{100 * time.Millisecond}, live: 150 * time.Millisecond, want: 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBacklogWatch(clock.RealClock{})
				connected := time.Now()
				b.connected()
				send := func(after time.Duration, sent time.Time) {
					time.AfterFunc(after, func() {
						b.saw(&runtimeapi.ContainerEventResponse{CreatedAt: sent.UnixNano()}, connected)
					})
				}
				for _, at := range tc.backlog {
					send(at, connected.Add(-time.Second))
				}
				if tc.live > 0 {
					send(tc.live, connected.Add(tc.live))
				}
				b.wait(context.Background(), func() (bool, time.Time) { return true, connected }, tc.patient)
				if got := time.Since(connected); got != tc.want {
					t.Errorf("waited %v, want %v", got, tc.want)
				}
			})
		})
	}
}
