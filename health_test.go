// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func TestStatusTellsHowRelistingFares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := fakeruntime.New(pod("a", ctr("ca", running)), pod("stuck", ctr("cs", running)))
		g := newLoopGenerator(t, rt, podcache.New(), func(o *Options) { o.InspectTimeout = 10 * time.Second })
		if s := g.Status(); !s.LastRelist.IsZero() || !s.RelistInFlightSince.IsZero() || len(s.FailingPods) != 0 {
			t.Fatalf("before any relist: %+v", s)
		}

		rt.SetHang("cs", true)
		start := time.Now()
		done := make(chan error)
		go func() { done <- g.Relist(t.Context()) }()
		synctest.Wait()
		if s := g.Status(); !s.RelistInFlightSince.Equal(start) || !s.LastRelist.Equal(start) {
			t.Errorf("while a pod hangs: in flight since %v, last relist %v; want both %v", s.RelistInFlightSince, s.LastRelist, start)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		s := g.Status()
		if !s.RelistInFlightSince.IsZero() {
			t.Errorf("in flight since %v after the relist returned", s.RelistInFlightSince)
		}
		if len(s.FailingPods) != 1 {
			t.Fatalf("failing pods %+v, want the stuck one", s.FailingPods)
		}
		if f := s.FailingPods[0]; f.UID != "stuck" || f.Name != "pod-stuck" || f.Namespace != "ns" || !f.Deadline ||
			!f.Since.Equal(start) || !errors.Is(f.Err, ErrInspectTimeout) {
			t.Errorf("failing pod %+v: want stuck, at %v, past its deadline", f, start)
		}

		// It keeps failing: the time it started failing stays.
		time.Sleep(time.Second)
		rt.SetHang("cs", false)
		rt.SetItemError("cs", errors.New("boom"))
		if err := g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		if f := g.Status().FailingPods; len(f) != 1 || f[0].Deadline || !f[0].Since.Equal(start) || f[0].Err == nil || !strings.Contains(f[0].Err.Error(), "boom") {
			t.Errorf("failing pods %+v: want stuck since %v, failing with boom", f, start)
		}

		rt.SetItemError("cs", nil)
		if err := g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		if f := g.Status().FailingPods; len(f) != 0 {
			t.Errorf("failing pods %+v once the pod answers", f)
		}
	})
}

func TestStatusOfAFailingPodThatGoes(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("a", ctr("ca", running))))
	e.rt.SetItemError("ca", errors.New("boom"))
	e.relist()
	if f := e.g.Status().FailingPods; len(f) != 1 {
		t.Fatalf("failing pods %+v, want a", f)
	}
	e.rt.RemovePod("a")
	e.relist()
	if f := e.g.Status().FailingPods; len(f) != 0 {
		t.Errorf("failing pods %+v after the pod went", f)
	}
}

func TestStatusOfARuntimeThatIsDown(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("a", ctr("ca", running))))
	e.relist()
	last := e.clock.Now()

	down := errors.New("connection refused")
	e.rt.InjectError(runtime.OpListPodSandbox, down)
	e.clock.Step(time.Second)
	failingSince := e.clock.Now()
	if err := e.g.Relist(t.Context()); err == nil {
		t.Fatal("relist succeeded with the runtime down")
	}
	e.rt.InjectError(runtime.OpListContainers, errors.New("still down"))
	e.clock.Step(time.Second)
	_ = e.g.Relist(t.Context())
	s := e.g.Status()
	if !s.ListFailingSince.Equal(failingSince) || s.ListError == nil || !strings.Contains(s.ListError.Error(), "still down") {
		t.Errorf("lists failing since %v with %v; want since %v, the latest error", s.ListFailingSince, s.ListError, failingSince)
	}
	if !s.LastRelist.Equal(last) {
		t.Errorf("last relist %v, want the last successful one at %v", s.LastRelist, last)
	}

	e.relist()
	if s := e.g.Status(); !s.ListFailingSince.IsZero() || s.ListError != nil || !s.LastRelist.Equal(e.clock.Now()) {
		t.Errorf("after recovery: %+v", s)
	}
}

// recordingHandler keeps every log record, for tests of what is logged.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count(level slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level {
			n++
		}
	}
	return n
}

// TestARuntimeDownIsSaidOnce: with the runtime down, every relist fails,
// global or of one pod; one error says so, not one per queued pod.
func TestARuntimeDownIsSaidOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pods := []fakeruntime.Pod{}
		for _, uid := range []string{"a", "b", "c", "d", "e"} {
			pods = append(pods, pod(uid, ctr("c"+uid, running)))
		}
		rt := fakeruntime.New(pods...)
		logs := &recordingHandler{}
		g := newLoopGenerator(t, rt, podcache.New(), func(o *Options) { o.Logger = slog.New(logs) })
		g.Start()
		defer g.Stop()
		synctest.Wait()

		for range 100 {
			rt.InjectError(runtime.OpListPodSandbox, errors.New("connection refused"))
		}
		for _, uid := range []string{"a", "b", "c", "d", "e"} {
			g.RequestRelist(uid)
		}
		time.Sleep(3 * loopPeriod)
		synctest.Wait()
		if n := logs.count(slog.LevelError); n != 1 {
			t.Errorf("%d errors logged for a runtime that is down, want 1", n)
		}
		if g.Status().ListFailingSince.IsZero() {
			t.Error("Status does not tell that lists fail")
		}
	})
}
