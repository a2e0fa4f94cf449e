// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
)

// scriptedSource answers each GetContainerEvents with the next of its
// attempts: an error, or a stream that sends events and then ends with an
// error after a while (or stays open while after is zero).
type scriptedSource struct {
	mu       sync.Mutex
	attempts []attempt
	opened   []time.Time
}

type attempt struct {
	err    error
	events []*runtimeapi.ContainerEventResponse
	after  time.Duration
	end    error
}

func (s *scriptedSource) GetContainerEvents(ctx context.Context) (runtime.EventStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened = append(s.opened, time.Now())
	if len(s.attempts) == 0 {
		return nil, status.Error(codes.Unavailable, "no more attempts scripted")
	}
	a := s.attempts[0]
	s.attempts = s.attempts[1:]
	if a.err != nil {
		return nil, a.err
	}
	return &scriptedStream{ctx: ctx, a: a}, nil
}

func (s *scriptedSource) openedAt() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.opened...)
}

type scriptedStream struct {
	ctx context.Context
	a   attempt
	i   int
}

func (s *scriptedStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	if s.i < len(s.a.events) {
		s.i++
		return s.a.events[s.i-1], nil
	}
	if s.a.after == 0 {
		<-s.ctx.Done()
		return nil, s.ctx.Err()
	}
	select {
	case <-time.After(s.a.after):
		return nil, s.a.end
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// supervised is a supervisor under test, and the generator it drives: it
// records what it is told.
type supervised struct {
	s       *Supervisor
	mu      sync.Mutex
	events  []string
	changes []string
}

func (sv *supervised) Deliver(ev *runtimeapi.ContainerEventResponse, _ time.Time) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.events = append(sv.events, ev.GetContainerId())
}

func (sv *supervised) StreamChanged(c Change) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.changes = append(sv.changes, map[Change]string{Connected: "up", Ended: "ended", Failed: "failed"}[c])
}

func (sv *supervised) RelistPod(string, Reason) {}

// testConfig is a supervisor's configuration with the daemon's defaults.
func testConfig(t *testing.T, required bool) Config {
	t.Helper()
	m, err := metrics.NewPLEG(nil)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Required: required, NoStreamRetry: 5 * time.Minute, Clock: clock.RealClock{},
		Logger: slog.New(slog.DiscardHandler), Metrics: m}
}

func supervise(t *testing.T, src runtime.EventSource, required bool) *supervised {
	t.Helper()
	sv := &supervised{}
	sv.s = newSupervisor(src, sv, testConfig(t, required))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sv.s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sv
}

func (sv *supervised) seen() (events, changes []string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return append([]string(nil), sv.events...), append([]string(nil), sv.changes...)
}

func evt(id string) *runtimeapi.ContainerEventResponse {
	return &runtimeapi.ContainerEventResponse{ContainerId: id}
}

func TestStreamSupervisor(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	for _, tc := range []struct {
		name string
		// required: a runtime without a stream is a fault (ModeEvented).
		required bool
		attempts []attempt
		// wait is how long to let it run.
		wait time.Duration
		// gaps are the pauses before each attempt after the first, within
		// the ±20% jitter.
		gaps        []time.Duration
		events      []string
		changes     []string
		connected   bool
		unsupported bool
	}{
		{
			name:     "failures back off, doubling",
			attempts: []attempt{{err: unavailable}, {err: unavailable}, {err: unavailable}, {}},
			wait:     time.Second,
			gaps:     []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
			changes:  []string{"failed", "failed", "failed", "up"},

			connected: true,
		},
		{
			name: "a stream that held reconnects at once",
			attempts: []attempt{
				{events: []*runtimeapi.ContainerEventResponse{evt("a"), evt("b")}, after: time.Minute, end: io.EOF},
				{events: []*runtimeapi.ContainerEventResponse{evt("c")}},
			},
			wait:      2 * time.Minute,
			gaps:      []time.Duration{time.Minute},
			events:    []string{"a", "b", "c"},
			changes:   []string{"up", "ended", "up"},
			connected: true,
		},
		{
			name:        "no stream: Unimplemented waits NoStreamRetry in auto mode",
			attempts:    []attempt{{err: status.Error(codes.Unimplemented, "unknown method GetContainerEvents")}, {}},
			wait:        6 * time.Minute,
			gaps:        []time.Duration{5 * time.Minute},
			changes:     []string{"failed", "up"},
			connected:   true,
			unsupported: false,
		},
		{
			name:        "no stream: closed at once, as CRI-O with pod events off",
			attempts:    []attempt{{after: time.Millisecond, end: io.EOF}},
			wait:        time.Minute,
			changes:     []string{"up", "ended"},
			unsupported: true,
		},
		{
			name:     "no stream in evented mode is a fault: retried with backoff",
			required: true,
			attempts: []attempt{{err: status.Error(codes.Unimplemented, "no")}, {}},
			wait:     time.Second,
			gaps:     []time.Duration{100 * time.Millisecond},
			changes:  []string{"failed", "up"},

			connected: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &scriptedSource{attempts: tc.attempts}
				sv := supervise(t, src, tc.required)
				time.Sleep(tc.wait)
				synctest.Wait()
				opened := src.openedAt()
				if len(opened) != len(tc.gaps)+1 {
					t.Fatalf("%d attempts at %v, want %d", len(opened), opened, len(tc.gaps)+1)
				}
				for i, want := range tc.gaps {
					gap := opened[i+1].Sub(opened[i])
					if gap < want*8/10 || gap > want*12/10 {
						t.Errorf("attempt %d came %v after the one before, want %v ±20%%", i+2, gap, want)
					}
				}
				events, changes := sv.seen()
				if !equalStrings(events, tc.events) || !equalStrings(changes, tc.changes) {
					t.Errorf("events %v and changes %v, want %v and %v", events, changes, tc.events, tc.changes)
				}
				if st := sv.s.State(); st.Connected != tc.connected || st.Unsupported != tc.unsupported {
					t.Errorf("connected %v, unsupported %v; want %v, %v", st.Connected, st.Unsupported, tc.connected, tc.unsupported)
				}
			})
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStreamRetriesAtOnceWhenTheRuntimeAnswers: after a long outage the
// backoff has grown to its cap; the first list that succeeds again retries
// the stream at once instead of waiting it out.
func TestStreamRetriesAtOnceWhenTheRuntimeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Out of scripted attempts, the source refuses every stream.
		src := &scriptedSource{}
		sv := supervise(t, src, false)
		// 100ms, 200ms, ... 25.6s, then 30s: the backoff is at its cap.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		n := len(src.openedAt())
		src.mu.Lock()
		src.attempts = []attempt{{}}
		src.mu.Unlock()
		sv.s.RetryNow()
		synctest.Wait()
		opened := src.openedAt()
		if len(opened) != n+1 || !opened[n].Equal(time.Now()) {
			t.Fatalf("attempts %d then %d, the last at %v; want one more, now (%v)", n, len(opened), opened[len(opened)-1], time.Now())
		}
		if !sv.s.State().Connected {
			t.Error("not connected after the retry")
		}
	})
}

// TestUntoldRemovals: a removal a relist found counts as untold only if
// its DELETED neither came within UntoldGrace before nor comes within it
// after: containerd sends a pod's container DELETEDs before its sandbox's,
// and a relist may list or inspect between. Three untold make a kind of
// removal untold, whatever the runtime is known to do.
func TestUntoldRemovals(t *testing.T) {
	s := newSupervisor(nil, &supervised{}, testConfig(t, false))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.up(t0, nil) // a stream that says nothing: the runtime is not known
	s.removalTold("known", ContainerRemovals, true, t0)
	since := t0.Add(time.Second)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	// Told before the relist found it, told after, and untold.
	s.removalTold("c1", ContainerRemovals, false, at(2*time.Second))
	s.removalsUntold(Removals{Containers: []string{"c1", "c2", "c3"}}, since, at(3*time.Second))
	s.removalTold("c2", ContainerRemovals, false, at(4*time.Second))
	if !s.tellsRemovals(ContainerRemovals, at(10*time.Second)) {
		t.Fatal("one removal untold made containers' untold")
	}
	s.removalsUntold(Removals{Containers: []string{"c4", "c5"}}, since, at(11*time.Second))
	if !s.tellsRemovals(ContainerRemovals, at(12*time.Second)) {
		t.Error("untold before their grace ran out")
	}
	if s.tellsRemovals(ContainerRemovals, at(11*time.Second+UntoldGrace)) {
		t.Error("three removals untold, and containers' still taken as told")
	}
	if s.tellsRemovals(PodRemovals, at(20*time.Second)) {
		t.Error("pod removals of a runtime not known, none seen, taken as told")
	}
	// Items observed before the stream connected count for nothing.
	s.up(at(time.Minute), nil)
	s.removalTold("x", PodRemovals, true, at(time.Minute))
	s.removalsUntold(Removals{Sandboxes: []string{"p1", "p2", "p3"}}, at(30*time.Second), at(time.Minute+time.Second))
	if !s.tellsRemovals(PodRemovals, at(2*time.Minute)) {
		t.Error("removals of items last observed before the stream connected counted")
	}
}

// TestContainerToldAfterItsPodsRemoval: a container removed on its own
// (CRI-O tells it) just before its pod (CRI-O does not) may be found
// removed with the pod before its DELETED comes. That DELETED tells that
// container removals are told, not pods': the removal watch must go on
// listing sandboxes, or the pods removed after would be found only by
// the global relist. The sandbox's own DELETED tells pods'.
func TestContainerToldAfterItsPodsRemoval(t *testing.T) {
	for _, known := range []runtime.Availability{runtime.Unsupported, runtime.Unknown} {
		t.Run(string(known), func(t *testing.T) {
			cfg := testConfig(t, false)
			s := newSupervisor(nil, &supervised{}, cfg)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s.up(t0, nil)
			s.removals[PodRemovals].known = known
			at := func(d time.Duration) time.Time { return t0.Add(d) }

			s.removalsUntold(Removals{Sandboxes: []string{"sb"}, Containers: []string{"c1", "c2"}},
				at(time.Second), at(2*time.Second))
			s.removalTold("c1", ContainerRemovals, false, at(3*time.Second))
			if s.tellsRemovals(PodRemovals, at(4*time.Second)) {
				t.Error("a container's DELETED after its pod's removal took pod removals as told")
			}
			if !s.tellsRemovals(ContainerRemovals, at(4*time.Second)) {
				t.Error("a container's DELETED did not take container removals as told")
			}
			s.removalTold("sb", ContainerRemovals, false, at(5*time.Second))
			if !s.tellsRemovals(PodRemovals, at(6*time.Second)) {
				t.Error("the sandbox's DELETED after its pod's removal did not take pod removals as told")
			}
		})
	}
}
