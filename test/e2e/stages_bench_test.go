// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/internal/trace"
)

// BenchmarkEventStages breaks down where each event's time goes, from
// the CRI call that caused it to a /v1/events client's read, on containerd
// with 100 pods × 2 containers and 5 container restarts a second (stop,
// remove, create, start), the daemon as shipped (evented, journal in a
// state directory) traced through internal/trace. Beside it a bare client
// of containerd's event stream gives the runtime's own delay in the same
// run. For each type (started, died, removed), p50 and p99 in ms of:
//
//   - runtime: the bare client's arrival after the call returned;
//   - read: the daemon's stream reader having the event, after the bare
//     client (decoding, and the reader's scheduling);
//   - queue: the relist loop taking it, after the reader queued it;
//   - apply: its payload applied and cached, after the loop took it;
//   - relist: for an event taken as a hint, its pod's relist told it
//     (committed), after the loop took it;
//   - commit: the journal's commit returned, after the payload was applied;
//   - fanout: handed to the subscriptions, after the commit;
//   - sub: a Subscribe() consumer's receipt, after the fan-out;
//   - api: the /v1/events client's read, after the commit (the journal's
//     wake-up of its readers, encoding, the write, the client's decoding);
//   - total: the API client's read after the call returned, and
//     over-stream: after the bare client's arrival, what pleg adds.
//
// NAME-hinted counts the events taken as hints; missing those never read.
//
//	go test -run '^$' -bench EventStages -benchtime 1x ./test/e2e/
//
// PLEG_BENCH_STAGES_DURATION sets how long the containers restart (20s).
func BenchmarkEventStages(b *testing.B) {
	in := benchContainerd(b)
	clearPods(b, in)
	b.Cleanup(func() { clearPods(b, in) })
	duration := 20 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PLEG_BENCH_STAGES_DURATION")); err == nil {
		duration = d
	}
	for b.Loop() {
		b.StopTimer()
		apps := startRestartApps(b, in, 100)
		stream := watchRuntimeStream(b, in)
		d := watchTracedDaemon(b, in)
		returned := runRestarts(b, in, apps, 5, duration)
		settle := time.Now().Add(10 * time.Second)
		for k := range returned {
			for {
				if _, ok := d.api.get(k); ok || time.Now().After(settle) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		d.report(b, returned, stream.consumers["stream"])
		b.StartTimer()
	}
}

// tracedDaemon is a daemon whose events are traced through their stages
// and read by a subscriber and an API client.
type tracedDaemon struct {
	mu     sync.Mutex
	stages map[arrivalKey]*[trace.NumStages]time.Time
	sub    *arrivals
	api    *arrivals
}

func (t *tracedDaemon) record(stage trace.Stage, id, typ string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := arrivalKey{id, typ}
	s := t.stages[k]
	if s == nil {
		s = new([trace.NumStages]time.Time)
		t.stages[k] = s
	}
	if s[stage].IsZero() {
		s[stage] = at
	}
}

// watchTracedDaemon starts the daemon as shipped, traced, with its
// journal in a state directory, and its two consumers.
func watchTracedDaemon(b *testing.B, in *runtimetest.Instance) *tracedDaemon {
	b.Helper()
	t := &tracedDaemon{stages: map[arrivalKey]*[trace.NumStages]time.Time{}, sub: newArrivals(), api: newArrivals()}
	runDaemon(b, context.Background(), in, pleg.Options{Mode: pleg.ModeEvented, Trace: t.record}, b.TempDir(),
		func(ev pleg.Event, now time.Time) { t.sub.add(ev.ContainerID, string(ev.Type), now) },
		func(ev api.Event, now time.Time) { t.api.add(ev.ContainerID, ev.Type, now) })
	return t
}

// report reports each stage's p50 and p99 by event type, as the
// benchmark's comment lists them.
func (t *tracedDaemon) report(b *testing.B, returned map[arrivalKey]time.Time, stream *arrivals) {
	b.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	short := map[string]string{string(pleg.ContainerStarted): "started", string(pleg.ContainerDied): "died", string(pleg.ContainerRemoved): "removed"}
	type series = map[string][]time.Duration
	by := map[string]series{}
	hinted := map[string]int{}
	missing := 0
	span := func(s series, name string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			s[name] = append(s[name], to.Sub(from))
		}
	}
	for k, called := range returned {
		typ := short[k.typ]
		if by[typ] == nil {
			by[typ] = series{}
		}
		s := by[typ]
		var st [trace.NumStages]time.Time
		if p := t.stages[k]; p != nil {
			st = *p
		}
		streamed, _ := stream.get(k)
		subAt, _ := t.sub.get(k)
		apiAt, ok := t.api.get(k)
		if !ok {
			missing++
		}
		span(s, "runtime", called, streamed)
		span(s, "read", streamed, st[trace.Received])
		span(s, "queue", st[trace.Received], st[trace.Dequeued])
		if st[trace.Hinted].IsZero() {
			span(s, "apply", st[trace.Dequeued], st[trace.Applied])
			span(s, "commit", st[trace.Applied], st[trace.Committed])
		} else {
			hinted[typ]++
			span(s, "relist", st[trace.Dequeued], st[trace.Committed])
		}
		span(s, "fanout", st[trace.Committed], st[trace.Published])
		span(s, "sub", st[trace.Published], subAt)
		span(s, "api", st[trace.Committed], apiAt)
		span(s, "total", called, apiAt)
		span(s, "over-stream", streamed, apiAt)
	}
	for _, typ := range []string{"started", "died", "removed"} {
		for _, stage := range []string{"runtime", "read", "queue", "apply", "relist", "commit", "fanout", "sub", "api", "total", "over-stream"} {
			reportQuantiles(b, typ+"-"+stage, by[typ][stage])
		}
		b.ReportMetric(float64(hinted[typ]), typ+"-hinted")
	}
	b.ReportMetric(float64(missing), "missing")
}
