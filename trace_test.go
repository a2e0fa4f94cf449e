// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plegkit/pleg/internal/trace"
)

// traced records the stages Options.Trace is told of, by event.
type traced struct {
	mu     sync.Mutex
	stages map[string][]trace.Stage
}

func (r *traced) record(stage trace.Stage, id, typ string, _ time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stages[id+"/"+typ] = append(r.stages[id+"/"+typ], stage)
}

func (r *traced) of(id string, typ EventType) []trace.Stage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.stages[id+"/"+string(typ)])
}

func TestTraceTellsEachStage(t *testing.T) {
	applied := []trace.Stage{trace.Received, trace.Dequeued, trace.Applied, trace.Committed, trace.Published}
	hinted := []trace.Stage{trace.Received, trace.Dequeued, trace.Hinted, trace.Committed, trace.Published}
	for _, tc := range []struct {
		name string
		opt  func(*Options)
		want []trace.Stage
	}{
		{"payloads", func(*Options) {}, applied},
		{"hints", hintOnly, hinted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &traced{stages: map[string][]trace.Stage{}}
				e := newEventedEnvWith(t, func(o *Options) {
					tc.opt(o)
					o.Trace = r.record
				}, webPod(ctr("c1", running)))
				e.settle()
				_ = e.rt.SetContainerState("c1", exited, 1)
				e.emit("web", "c1", evStopped)
				if got := r.of("c1", ContainerDied); !slices.Equal(got, tc.want) {
					t.Errorf("Died(c1) passed %v, want %v", got, tc.want)
				}
				// The first relist's Started came from no event: it was
				// committed and published, never received.
				if got, want := r.of("c1", ContainerStarted), []trace.Stage{trace.Committed, trace.Published}; !slices.Equal(got, want) {
					t.Errorf("Started(c1) passed %v, want %v", got, want)
				}
			})
		})
	}
}
