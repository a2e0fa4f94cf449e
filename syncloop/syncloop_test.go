// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package syncloop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plegkit/pleg"
)

// fakeSource is a channel-backed Source that counts the events read from
// it. Closing ch makes Next report pleg.ErrSubscriptionClosed.
type fakeSource struct {
	ch   chan sourceItem
	read atomic.Int64
}

type sourceItem struct {
	ev  pleg.Event
	err error
}

func newFakeSource() *fakeSource { return &fakeSource{ch: make(chan sourceItem, 100)} }

func (s *fakeSource) Next(ctx context.Context) (pleg.Event, error) {
	select {
	case it, ok := <-s.ch:
		if !ok {
			return pleg.Event{}, pleg.ErrSubscriptionClosed
		}
		if it.err != nil {
			return pleg.Event{}, it.err
		}
		s.read.Add(1)
		return it.ev, nil
	case <-ctx.Done():
		return pleg.Event{}, ctx.Err()
	}
}

func (s *fakeSource) send(evs ...pleg.Event) {
	for _, ev := range evs {
		s.ch <- sourceItem{ev: ev}
	}
}

func ev(typ pleg.EventType, pod, container string) pleg.Event {
	return pleg.Event{Type: typ, PodUID: pod, ContainerID: container}
}

// recorder stands for the kubelet's pod workers: it logs calls in order,
// flags overlapping syncs of one pod, and can hold a pod's syncs until
// released through its gate.
type recorder struct {
	t *testing.T

	mu            sync.Mutex
	calls         []string
	inFlight      map[string]int
	concurrent    int
	maxConcurrent int
	gates         map[string]chan struct{}
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, inFlight: make(map[string]int), gates: make(map[string]chan struct{})}
}

// hold makes syncs of pod block until release.
func (r *recorder) hold(pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gates[pod] = make(chan struct{})
}

// release lets one held sync of pod return.
func (r *recorder) release(pod string) {
	r.mu.Lock()
	gate := r.gates[pod]
	r.mu.Unlock()
	gate <- struct{}{}
}

func (r *recorder) syncPod(_ context.Context, uid string) {
	r.mu.Lock()
	r.calls = append(r.calls, "sync "+uid)
	r.inFlight[uid]++
	if r.inFlight[uid] > 1 {
		r.t.Errorf("SyncPod(%q) called while another SyncPod(%q) is in flight", uid, uid)
	}
	r.concurrent++
	r.maxConcurrent = max(r.maxConcurrent, r.concurrent)
	gate := r.gates[uid]
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	r.mu.Lock()
	r.inFlight[uid]--
	r.concurrent--
	r.mu.Unlock()
}

func (r *recorder) containerDied(_ context.Context, e pleg.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Type != pleg.ContainerDied {
		r.t.Errorf("ContainerDied hook got a %s event", e.Type)
	}
	r.calls = append(r.calls, "died "+e.PodUID+" "+e.ContainerID)
}

// callsFor returns the calls about pod, in order.
func (r *recorder) callsFor(pod string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		if strings.Fields(c)[1] == pod {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) allCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// fakeHealth is a switchable health check that records when it ran.
type fakeHealth struct {
	mu      sync.Mutex
	healthy bool
	err     error
	calls   []time.Time
}

func (h *fakeHealth) set(healthy bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthy, h.err = healthy, err
}

func (h *fakeHealth) check() (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, time.Now())
	return h.healthy, h.err
}

func (h *fakeHealth) callTimes() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness runs a loop over fakes; it must be created inside a synctest
// bubble so that clock.RealClock{} runs on virtual time.
type harness struct {
	src    *fakeSource
	rec    *recorder
	health *fakeHealth
	logs   *lockedBuffer
	loop   *Loop
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, healthy bool) *harness {
	t.Helper()
	h := &harness{
		src:    newFakeSource(),
		rec:    newRecorder(t),
		health: &fakeHealth{healthy: healthy, err: errors.New("pleg has yet to be successful")},
		logs:   &lockedBuffer{},
		done:   make(chan error, 1),
	}
	if healthy {
		h.health.err = nil
	}
	loop, err := New(h.src, Options{
		SyncPod:       h.rec.syncPod,
		ContainerDied: h.rec.containerDied,
		HealthChecks:  []pleg.HealthCheck{{Name: "PLEG", Healthy: h.health.check}},
		Logger:        slog.New(slog.NewTextHandler(h.logs, nil)),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.loop = loop
	var ctx context.Context
	ctx, h.cancel = context.WithCancel(context.Background())
	go func() { h.done <- loop.Run(ctx) }()
	// Lets the bubble end cleanly after a failed assertion stops the test
	// with the loop still running or syncs held.
	t.Cleanup(func() {
		h.cancel()
		h.rec.mu.Lock()
		defer h.rec.mu.Unlock()
		for _, gate := range h.rec.gates {
			close(gate)
		}
	})
	return h
}

// stop cancels the loop and returns what Run returned.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	if err := <-h.done; err != nil {
		t.Errorf("Run returned %v after cancel, want nil", err)
	}
}

func (h *harness) returned() bool {
	select {
	case err := <-h.done:
		h.done <- err
		return true
	default:
		return false
	}
}

func TestNew(t *testing.T) {
	syncPod := func(context.Context, string) {}
	check := func() (bool, error) { return true, nil }
	tests := []struct {
		name    string
		src     Source
		opts    Options
		wantErr string
	}{
		{"ok", newFakeSource(), Options{SyncPod: syncPod, HealthChecks: []pleg.HealthCheck{{Name: "PLEG", Healthy: check}}}, ""},
		{"nil source", nil, Options{SyncPod: syncPod}, "syncloop: source is nil"},
		{"nil SyncPod", newFakeSource(), Options{}, "syncloop: Options.SyncPod is nil"},
		{"unnamed check", newFakeSource(), Options{SyncPod: syncPod, HealthChecks: []pleg.HealthCheck{{Name: "", Healthy: check}}}, "syncloop: Options.HealthChecks[0] has no name"},
		{"nil check", newFakeSource(), Options{SyncPod: syncPod, HealthChecks: []pleg.HealthCheck{{Name: "PLEG", Healthy: nil}}}, `syncloop: health check "PLEG" has a nil Healthy`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loop, err := New(tt.src, tt.opts)
			if tt.wantErr == "" {
				if err != nil || loop == nil {
					t.Fatalf("New() = %v, %v; want a loop", loop, err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("New() error = %v, want %q", err, tt.wantErr)
			}
			if loop != nil {
				t.Errorf("New() returned a loop along with an error")
			}
		})
	}
}

func TestRuntimeErrors(t *testing.T) {
	ok := func() (bool, error) { return true, nil }
	fail := func(msg string) func() (bool, error) {
		return func() (bool, error) { return false, errors.New(msg) }
	}
	tests := []struct {
		name   string
		checks []pleg.HealthCheck
		want   []string
	}{
		{"no checks", nil, nil},
		{"all healthy", []pleg.HealthCheck{{Name: "PLEG", Healthy: ok}, {Name: "EventedPLEG", Healthy: ok}}, nil},
		{
			"PLEG stale",
			[]pleg.HealthCheck{{Name: "PLEG", Healthy: fail("pleg was last seen active 3m5s ago; threshold is 3m0s")}},
			[]string{"PLEG is not healthy: pleg was last seen active 3m5s ago; threshold is 3m0s"},
		},
		{
			"several failing, in check order",
			[]pleg.HealthCheck{{Name: "PLEG", Healthy: fail("pleg has yet to be successful")}, {Name: "Other", Healthy: ok}, {Name: "EventedPLEG", Healthy: fail("stream closed")}},
			[]string{"PLEG is not healthy: pleg has yet to be successful", "EventedPLEG is not healthy: stream closed"},
		},
		{
			"unhealthy without error, as kubelet prints it",
			[]pleg.HealthCheck{{Name: "PLEG", Healthy: func() (bool, error) { return false, nil }}},
			[]string{"PLEG is not healthy: <nil>"},
		},
		{
			"healthy with error counts as healthy",
			[]pleg.HealthCheck{{Name: "PLEG", Healthy: func() (bool, error) { return true, errors.New("ignored") }}},
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loop, err := New(newFakeSource(), Options{SyncPod: func(context.Context, string) {}, HealthChecks: tt.checks})
			if err != nil {
				t.Fatal(err)
			}
			if got := loop.RuntimeErrors(); !slices.Equal(got, tt.want) {
				t.Errorf("RuntimeErrors() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEventTypes(t *testing.T) {
	tests := []struct {
		typ  pleg.EventType
		want []string
	}{
		{pleg.ContainerStarted, []string{"sync a"}},
		{pleg.ContainerDied, []string{"sync a", "died a c1"}},
		{pleg.ContainerRemoved, nil},
		{pleg.PodSync, []string{"sync a"}},
		{pleg.ConditionMet, []string{"sync a"}},
		{pleg.ContainerChanged, []string{"sync a"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.typ), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, true)
				h.src.send(ev(tt.typ, "a", "c1"))
				synctest.Wait()
				if got := h.rec.allCalls(); !slices.Equal(got, tt.want) {
					t.Errorf("calls = %q, want %q", got, tt.want)
				}
				h.stop(t)
			})
		})
	}
}

// Events that arrive together while dispatch is held back coalesce into one
// sync per pod, followed by the pod's died containers once each, in
// arrival order; nothing is kept once the pods are synced.
func TestCoalescePending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, false)
		h.src.send(
			ev(pleg.ContainerStarted, "a", "c1"),
			ev(pleg.ContainerStarted, "b", "c1"),
			ev(pleg.ContainerDied, "a", "c2"),
			ev(pleg.ContainerDied, "a", "c1"),
			ev(pleg.ContainerDied, "a", "c2"),
			ev(pleg.PodSync, "c", ""),
			ev(pleg.ContainerRemoved, "b", "c0"),
			ev(pleg.ContainerRemoved, "a", "c2"),
			ev(pleg.ContainerRemoved, "d", "c1"),
		)
		synctest.Wait()
		if got := h.src.read.Load(); got != 9 {
			t.Fatalf("read %d events while unhealthy, want 9", got)
		}
		if got := h.rec.allCalls(); len(got) != 0 {
			t.Fatalf("calls while unhealthy = %q, want none", got)
		}
		h.health.set(true, nil)
		time.Sleep(time.Second)
		synctest.Wait()
		want := map[string][]string{
			"a": {"sync a", "died a c2", "died a c1"},
			"b": {"sync b"},
			"c": {"sync c"},
			"d": nil,
		}
		for pod, w := range want {
			if got := h.rec.callsFor(pod); !slices.Equal(got, w) {
				t.Errorf("calls for %s = %q, want %q", pod, got, w)
			}
		}
		h.loop.mu.Lock()
		left := len(h.loop.pods)
		h.loop.mu.Unlock()
		if left != 0 {
			t.Errorf("%d pods still tracked after all were synced", left)
		}
		h.stop(t)
	})
}

// A pod has one worker at a time; events for it meanwhile cause exactly one
// more sync, with the died containers seen meanwhile. Other pods are not
// held up.
func TestOneWorkerPerPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, true)
		h.rec.hold("a")
		h.rec.hold("b")
		h.src.send(ev(pleg.ContainerStarted, "a", "c1"), ev(pleg.ContainerStarted, "b", "c1"))
		synctest.Wait()
		h.src.send(
			ev(pleg.ContainerDied, "a", "c1"),
			ev(pleg.ContainerStarted, "a", "c2"),
			ev(pleg.ContainerDied, "a", "c3"),
			ev(pleg.PodSync, "c", ""),
		)
		synctest.Wait()
		if got, want := h.rec.callsFor("a"), []string{"sync a"}; !slices.Equal(got, want) {
			t.Fatalf("calls for a while in flight = %q, want %q", got, want)
		}
		if got, want := h.rec.callsFor("c"), []string{"sync c"}; !slices.Equal(got, want) {
			t.Errorf("calls for c while a and b are in flight = %q, want %q", got, want)
		}
		h.rec.release("a")
		synctest.Wait()
		if got, want := h.rec.callsFor("a"), []string{"sync a", "sync a"}; !slices.Equal(got, want) {
			t.Fatalf("calls for a after first release = %q, want %q", got, want)
		}
		h.rec.release("a")
		h.rec.release("b")
		synctest.Wait()
		if got, want := h.rec.callsFor("a"), []string{"sync a", "sync a", "died a c1", "died a c3"}; !slices.Equal(got, want) {
			t.Errorf("calls for a = %q, want %q", got, want)
		}
		if got, want := h.rec.callsFor("b"), []string{"sync b"}; !slices.Equal(got, want) {
			t.Errorf("calls for b = %q, want %q", got, want)
		}
		h.rec.mu.Lock()
		maxConcurrent := h.rec.maxConcurrent
		h.rec.mu.Unlock()
		if maxConcurrent < 2 {
			t.Errorf("at most %d syncs ran at once, want different pods to run concurrently", maxConcurrent)
		}
		h.stop(t)
	})
}

// A pod that becomes pending while its worker runs keeps its place: it goes
// before pods that became pending after it, even if its worker returns
// later.
func TestDispatchOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, true)
		h.rec.hold("a")
		h.src.send(ev(pleg.ContainerStarted, "a", "c1"))
		synctest.Wait()
		h.health.set(false, errors.New("down"))
		h.src.send(ev(pleg.PodSync, "a", ""), ev(pleg.PodSync, "b", ""), ev(pleg.PodSync, "c", ""))
		synctest.Wait()
		h.rec.release("a")
		synctest.Wait()
		h.loop.mu.Lock()
		var order []string
		for _, p := range h.loop.ready {
			order = append(order, p.uid)
		}
		h.loop.mu.Unlock()
		if want := []string{"a", "b", "c"}; !slices.Equal(order, want) {
			t.Errorf("ready order = %q, want %q", order, want)
		}
		h.stop(t)
	})
}

// While the check fails the source is still drained but nothing is synced,
// and the check is retried after 100ms, doubling up to 5s. Once healthy,
// pending pods are synced once and the backoff starts over.
func TestUnhealthyBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stale = "pleg was last seen active 3m5s ago; threshold is 3m0s"
		h := start(t, false)
		h.health.set(false, errors.New(stale))

		time.Sleep(10 * time.Second)
		if n := len(h.health.callTimes()); n != 0 {
			t.Fatalf("health checked %d times with nothing to dispatch, want 0", n)
		}

		t0 := time.Now()
		h.src.send(ev(pleg.ContainerStarted, "a", "c1"))
		time.Sleep(2 * time.Second)
		h.src.send(ev(pleg.ContainerDied, "b", "c1"), ev(pleg.ContainerStarted, "a", "c2"))
		time.Sleep(18 * time.Second) // t0+20s, between checks
		synctest.Wait()
		if got := h.src.read.Load(); got != 3 {
			t.Errorf("read %d events while unhealthy, want 3", got)
		}
		if got := h.rec.allCalls(); len(got) != 0 {
			t.Errorf("calls while unhealthy = %q, want none", got)
		}
		ms := time.Millisecond
		wantGaps := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
		calls := h.health.callTimes()
		if len(calls) == 0 {
			t.Fatal("health never checked with a pod pending")
		}
		if calls[0] != t0 {
			t.Errorf("first check at t0%+v, want at t0", calls[0].Sub(t0))
		}
		if got := gaps(calls); !slices.Equal(got, wantGaps) {
			t.Errorf("gaps between checks = %v, want %v", got, wantGaps)
		}
		logs := h.logs.String()
		if !strings.Contains(logs, "Skipping pod synchronization") || !strings.Contains(logs, "PLEG is not healthy: "+stale) {
			t.Errorf("logs lack the skip message with the error:\n%s", logs)
		}

		// Checks fall at t0+16.3s and t0+21.3s: turning healthy now lets
		// the second dispatch.
		h.health.set(true, nil)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := h.health.callTimes(); len(got) != 10 || got[9].Sub(t0) != 21300*ms {
			t.Fatalf("checks at %v, want a 10th at t0+21.3s", offsets(got, t0))
		}
		for pod, want := range map[string][]string{"a": {"sync a"}, "b": {"sync b", "died b c1"}} {
			if got := h.rec.callsFor(pod); !slices.Equal(got, want) {
				t.Errorf("calls for %s = %q, want %q", pod, got, want)
			}
		}

		h.health.set(false, errors.New(stale))
		t1 := time.Now()
		h.src.send(ev(pleg.PodSync, "c", ""))
		time.Sleep(350 * time.Millisecond)
		calls = h.health.callTimes()[10:]
		if got, want := offsets(calls, t1), []time.Duration{0, 100 * ms, 300 * ms}; !slices.Equal(got, want) {
			t.Errorf("checks after turning unhealthy again at %v, want %v (backoff reset)", got, want)
		}
		h.stop(t)
	})
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

func offsets(ts []time.Time, from time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(from))
	}
	return out
}

var errBoom = errors.New("boom")

// Run waits for syncs in flight, then returns nil when ctx ends or the
// subscription is closed and the error for any other source failure.
func TestRunReturns(t *testing.T) {
	tests := []struct {
		name    string
		healthy bool
		end     func(h *harness)
		wantErr error
	}{
		{"context canceled", true, func(h *harness) { h.cancel() }, nil},
		{"subscription closed", true, func(h *harness) { close(h.src.ch) }, nil},
		{"source error", true, func(h *harness) { h.src.ch <- sourceItem{err: errBoom} }, errBoom},
		{"context canceled during backoff", false, func(h *harness) { h.cancel() }, nil},
		{"source error during backoff", false, func(h *harness) { h.src.ch <- sourceItem{err: errBoom} }, errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, tt.healthy)
				if tt.healthy {
					h.rec.hold("a")
				}
				h.src.send(ev(pleg.ContainerStarted, "a", "c1"))
				synctest.Wait()
				tt.end(h)
				synctest.Wait()
				if tt.healthy {
					if h.returned() {
						t.Fatal("Run returned with a sync in flight")
					}
					h.rec.release("a")
					synctest.Wait()
				}
				if !h.returned() {
					t.Fatal("Run did not return")
				}
				err := <-h.done
				if tt.wantErr == nil && err != nil {
					t.Errorf("Run() = %v, want nil", err)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("Run() = %v, want an error wrapping %v", err, tt.wantErr)
				}
			})
		})
	}
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, true)
		synctest.Wait()
		if err := h.loop.Run(context.Background()); err == nil {
			t.Error("second Run() = nil, want an error")
		}
		h.stop(t)
	})
}

// Without a ContainerDied hook nothing is kept of died events.
func TestNoDiedHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newFakeSource()
		var synced []string
		var mu sync.Mutex
		loop, err := New(src, Options{SyncPod: func(_ context.Context, uid string) {
			mu.Lock()
			defer mu.Unlock()
			synced = append(synced, uid)
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- loop.Run(ctx) }()
		for i := range 3 {
			src.send(ev(pleg.ContainerDied, "a", fmt.Sprint("c", i)))
			synctest.Wait()
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
		if want := []string{"a", "a", "a"}; !slices.Equal(synced, want) {
			t.Errorf("synced %q, want %q", synced, want)
		}
	})
}
