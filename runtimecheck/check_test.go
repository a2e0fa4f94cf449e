// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimecheck

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime answers Status as told: hang (until the call's context
// ends), fail with err, or answer with the conditions.
type fakeRuntime struct {
	mu    sync.Mutex
	delay time.Duration
	hang  bool
	err   error
	ready bool
	calls int
}

func (f *fakeRuntime) set(hang bool, err error, ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hang, f.err, f.ready = hang, err, ready
}

func (f *fakeRuntime) Status(ctx context.Context, _ bool) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	f.calls++
	hang, err, ready, delay := f.hang, f.err, f.ready, f.delay
	f.mu.Unlock()
	time.Sleep(delay)
	if hang {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: ready, Reason: "r", Message: "m"},
		{Type: runtimeapi.NetworkReady, Status: true},
		// containerd 2.x's, which the kubelet ignores.
		{Type: "ContainerdHasNoDeprecationWarnings", Status: false, Reason: "ContainerdHasDeprecationWarnings"},
		nil, // a runtime may send anything: skipped
	}}}, nil
}

func (f *fakeRuntime) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func start(t *testing.T, rt *fakeRuntime) (*Check, func()) {
	t.Helper()
	c, err := New(Config{Runtime: rt, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	return c, func() {
		cancel()
		<-done
	}
}

func TestAnsweringRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRuntime{ready: true}
		c, stop := start(t, rt)
		defer stop()
		synctest.Wait()
		t0 := time.Now()
		time.Sleep(time.Minute)
		synctest.Wait()
		s := c.State()
		if !s.UnansweredSince.IsZero() || s.Err != nil || s.InFlight {
			t.Errorf("an answering runtime: %+v", s)
		}
		if got := s.LastAnswer; got.Before(t0.Add(55 * time.Second)) {
			t.Errorf("last answer %v, want within the last period of %v", got, time.Now())
		}
		// One call every 5 s after the last returned: 1 + 60/5.
		if n := rt.count(); n != 13 {
			t.Errorf("%d calls in a minute, want 13", n)
		}
		if _, bad := s.NotReady(); bad {
			t.Errorf("a ready runtime reported not ready: %+v", s.Conditions)
		}
	})
}

func TestHungRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRuntime{ready: true}
		c, stop := start(t, rt)
		defer stop()
		synctest.Wait()
		time.Sleep(6 * time.Second) // the second call answered
		synctest.Wait()
		rt.set(true, nil, true)
		time.Sleep(4 * time.Second) // the third starts at 10 s, and hangs
		synctest.Wait()
		hungAt := time.Now()
		if s := c.State(); !s.InFlight || !s.UnansweredSince.Equal(hungAt) {
			t.Fatalf("a call in flight: %+v, want unanswered since %v", s, hungAt)
		}
		time.Sleep(Unanswered - time.Second)
		if bad, _ := c.State().NotAnswering(time.Now()); bad {
			t.Errorf("not answering before %v", Unanswered)
		}
		time.Sleep(time.Second)
		if bad, since := c.State().NotAnswering(time.Now()); !bad || !since.Equal(hungAt) {
			t.Errorf("after %v: not answering %v since %v, want since %v", Unanswered, bad, since, hungAt)
		}
		// The call ends at the timeout and the next one hangs too: the
		// runtime is unanswered since the first, and one call at a time
		// was sent.
		before := rt.count()
		time.Sleep(DefaultTimeout + 10*time.Second)
		synctest.Wait()
		s := c.State()
		if !s.UnansweredSince.Equal(hungAt) || status.Code(s.Err) != codes.DeadlineExceeded {
			t.Errorf("after a timeout: %+v, want unanswered since %v with DeadlineExceeded", s, hungAt)
		}
		if n := rt.count() - before; n != 1 {
			t.Errorf("%d calls over a hang of %v, want 1 (the next)", n, DefaultTimeout)
		}
		// It answers again.
		rt.set(false, nil, true)
		time.Sleep(DefaultTimeout)
		synctest.Wait()
		if s := c.State(); !s.UnansweredSince.IsZero() || s.Err != nil {
			t.Errorf("answering again: %+v", s)
		}
	})
}

func TestFailingRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := status.Error(codes.Unavailable, "connection refused")
		rt := &fakeRuntime{err: refused}
		c, stop := start(t, rt)
		defer stop()
		synctest.Wait()
		since := time.Now()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		s := c.State()
		if bad, at := s.NotAnswering(time.Now()); !bad || !at.Equal(since) || !errors.Is(s.Err, refused) {
			t.Errorf("refused for 30 s: %+v (not answering %v since %v)", s, bad, at)
		}
		if !s.LastAnswer.IsZero() {
			t.Errorf("a runtime that never answered has a last answer %v", s.LastAnswer)
		}
	})
}

func TestRuntimeNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRuntime{ready: false}
		c, stop := start(t, rt)
		defer stop()
		synctest.Wait()
		cond, bad := c.State().NotReady()
		if !bad || cond.Type != runtimeapi.RuntimeReady || cond.Reason != "r" || cond.Message != "m" {
			t.Errorf("not ready: %v %+v", bad, cond)
		}
	})
}

func TestSlowRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRuntime{ready: true}
		c, stop := start(t, rt)
		defer stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if s := c.State(); s.IsSlow() || s.Latency != 0 {
			t.Errorf("answers at once: latency %v, slow %v", s.Latency, s.IsSlow())
		}
		// One slow answer among fast ones is a busy moment, not a
		// starved runtime.
		rt.mu.Lock()
		rt.delay = 10 * time.Second
		rt.mu.Unlock()
		time.Sleep(6 * time.Second)
		rt.mu.Lock()
		rt.delay = 0
		rt.mu.Unlock()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if s := c.State(); s.IsSlow() {
			t.Errorf("one slow answer made the runtime slow: latency %v", s.Latency)
		}
		// Every answer 3 s: slow, from the third.
		rt.mu.Lock()
		rt.delay = 3 * time.Second
		rt.mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		if s := c.State(); !s.IsSlow() || s.Latency != 3*time.Second || !s.UnansweredSince.IsZero() && !s.InFlight {
			t.Errorf("answers in 3 s: %+v", s)
		}
	})
}

func TestConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("no runtime: no error")
	}
	if _, err := New(Config{Runtime: &fakeRuntime{}, Period: -time.Second}); err == nil {
		t.Error("a negative period: no error")
	}
}
