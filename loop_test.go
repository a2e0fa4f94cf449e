// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// Tests of the relist loop run in a synctest bubble: the real clock is
// virtual there, and time moves only when every goroutine waits.

const loopPeriod = 2 * time.Second

func newLoopGenerator(t *testing.T, rt runtime.Runtime, cache *podcache.Cache, opts ...envOption) *Generator {
	t.Helper()
	o := Options{
		RelistPeriod: loopPeriod,
		Cache:        cache,
		Clock:        clock.RealClock{},
		Logger:       slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		opt(&o)
	}
	g, err := New(rt, o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// waitFor returns a channel that receives the pod's status once the cache
// holds one observed after since.
func waitFor(ctx context.Context, cache *podcache.Cache, uid string, since time.Time) <-chan *runtime.PodStatus {
	ch := make(chan *runtime.PodStatus, 1)
	go func() {
		if s, err := cache.GetNewerThan(ctx, uid, since); err == nil {
			ch <- s
		}
	}()
	return ch
}

func released(ch <-chan *runtime.PodStatus) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWorkerLoop(t *testing.T) {
	t.Run("per-pod relist releases only that pod", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := fakeruntime.New(pod("pod1", ctr("c1", running)), pod("pod2", ctr("c2", running)))
			cache := podcache.New()
			g := newLoopGenerator(t, rt, cache)
			ch := g.Watch()
			g.Start()
			defer g.Stop()
			synctest.Wait()
			assertEvents(t, drain(ch), startedEv("pod1", "c1"), startedEv("pod2", "c2"))

			t0 := time.Now()
			w1, w2 := waitFor(t.Context(), cache, "pod1", t0), waitFor(t.Context(), cache, "pod2", t0)
			time.Sleep(100 * time.Millisecond)
			_ = rt.SetContainerState("c1", exited, 1)
			rt.ResetCalls()
			g.RequestRelist("pod1")
			synctest.Wait()

			assertEvents(t, drain(ch), diedEv("pod1", "c1"))
			if rt.ItemCalls("c1") != 1 || rt.ItemCalls("c2") != 0 {
				t.Errorf("status calls c1=%d c2=%d, want 1 and 0", rt.ItemCalls("c1"), rt.ItemCalls("c2"))
			}
			if !released(w1) || released(w2) {
				t.Error("want the waiter for pod1 released and the one for pod2 still waiting")
			}
			if g.health.last() != t0 {
				t.Error("a per-pod relist moved the global relist time")
			}
		})
	})

	t.Run("an unchanged pod's waiters are released too", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := fakeruntime.New(pod("pod1", ctr("c1", running)))
			cache := podcache.New()
			g := newLoopGenerator(t, rt, cache)
			g.Start()
			defer g.Stop()
			synctest.Wait()
			time.Sleep(100 * time.Millisecond)
			w := waitFor(t.Context(), cache, "pod1", time.Now())
			time.Sleep(100 * time.Millisecond)
			g.RequestRelist("pod1")
			synctest.Wait()
			if !released(w) {
				t.Error("waiter not released by a per-pod relist that found no change")
			}
		})
	})

	// While the loop is busy, a request arrives and the global relist falls
	// due: the global relist goes first and serves the request, which is
	// then skipped.
	t.Run("due global relist wins and covers the request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := fakeruntime.New(pod("pod1", ctr("c1", running)), pod("pod2", ctr("c2", running)))
			cache := podcache.New()
			g := newLoopGenerator(t, rt, cache)
			ch := g.Watch()
			g.Start()
			defer g.Stop()
			synctest.Wait()
			drain(ch)
			t0 := time.Now()
			w1, w2 := waitFor(t.Context(), cache, "pod1", t0), waitFor(t.Context(), cache, "pod2", t0)

			// Keep the loop in a per-pod relist of pod1 from 1 s to 2.5 s;
			// the global relist falls due at 2 s and runs until 4 s.
			rt.SetLatency(runtime.OpListPodSandbox, 1500*time.Millisecond)
			time.Sleep(time.Second)
			rt.ResetCalls()
			g.RequestRelist("pod1")
			time.Sleep(200 * time.Millisecond)
			_ = rt.SetContainerState("c2", exited, 0)
			g.RequestRelist("pod2")
			time.Sleep(3800 * time.Millisecond)
			synctest.Wait()

			// pod1's relist, then the global one; no relist of pod2 alone.
			if n := rt.Calls(runtime.OpListPodSandbox); n != 2 {
				t.Errorf("%d sandbox lists, want 2 (pod1, then global)", n)
			}
			if rt.ItemCalls("c1") != 0 {
				t.Error("unchanged pod1 inspected")
			}
			assertEvents(t, drain(ch), diedEv("pod2", "c2"))
			if !released(w1) || !released(w2) {
				t.Error("the global relist did not release both waiters")
			}
		})
	})

	t.Run("re-inspection request served by the global relist", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := fakeruntime.New(pod("pod1", ctr("c1", running)))
			cache := podcache.New()
			g := newLoopGenerator(t, rt, cache)
			ch := g.Watch()
			g.Start()
			defer g.Stop()
			synctest.Wait()
			drain(ch)
			before, _ := cache.GetEntry("pod1")

			rt.SetLatency(runtime.OpListPodSandbox, 1500*time.Millisecond)
			time.Sleep(time.Second)
			rt.ResetCalls()
			g.RequestRelist("other") // keeps the loop busy until 2.5 s
			time.Sleep(200 * time.Millisecond)
			g.RequestReinspect("pod1")
			g.RequestRelist("pod1")
			time.Sleep(3800 * time.Millisecond)
			synctest.Wait()

			if n := rt.Calls(runtime.OpListPodSandbox); n != 2 {
				t.Errorf("%d sandbox lists, want 2 (other, then global)", n)
			}
			if rt.ItemCalls("c1") != 1 {
				t.Errorf("pod1 inspected %d times, want once", rt.ItemCalls("c1"))
			}
			assertEvents(t, drain(ch), podSyncEv("pod1"))
			if after, _ := cache.GetEntry("pod1"); !after.Modified.After(before.Modified) {
				t.Error("re-inspection did not write a newer status")
			}
		})
	})
}

func TestRelistRequestsCoalesce(t *testing.T) {
	q := newRequestQueue()
	t0 := testStart
	q.add("a", t0)
	q.add("b", t0.Add(time.Second))
	q.add("a", t0.Add(2*time.Second))
	if q.len() != 2 {
		t.Fatalf("%d pending, want 2", q.len())
	}
	uid, at, _ := q.pop()
	if uid != "a" || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("first = %s at %v, want a at its latest request", uid, at)
	}
	uid, _, _ = q.pop()
	if uid != "b" {
		t.Errorf("second = %s, want b", uid)
	}
	if _, _, ok := q.pop(); ok {
		t.Error("queue not empty")
	}
	// Far more requests than the kubelet's 200 slots: none is lost.
	for i := range 1000 {
		q.add(string(rune('A'+i%26))+string(rune(i)), t0)
	}
	if q.len() != 1000 {
		t.Errorf("%d pending, want 1000", q.len())
	}
}

func TestStartStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := fakeruntime.New(pod("p1", ctr("c1", running)))
		g := newLoopGenerator(t, rt, podcache.New())
		g.Start()
		g.Start() // no second loop
		synctest.Wait()
		if n := rt.Calls(runtime.OpListPodSandbox); n != 1 {
			t.Fatalf("%d relists at start, want 1", n)
		}
		time.Sleep(loopPeriod)
		synctest.Wait()
		if n := rt.Calls(runtime.OpListPodSandbox); n != 2 {
			t.Fatalf("%d relists after one period, want 2", n)
		}

		// Stop cancels a relist that hangs on the runtime.
		rt.SetLatency(runtime.OpListContainers, time.Hour)
		time.Sleep(loopPeriod)
		synctest.Wait()
		g.Stop()
		g.Stop()
		if ok, _ := g.Healthy(); !ok {
			t.Error("unhealthy right after a stop")
		}

		rt.SetLatency(runtime.OpListContainers, 0)
		rt.ResetCalls()
		time.Sleep(time.Hour)
		if n := rt.Calls(runtime.OpListPodSandbox); n != 0 {
			t.Errorf("%d relists while stopped", n)
		}
		g.Start()
		synctest.Wait()
		if n := rt.Calls(runtime.OpListPodSandbox); n != 1 {
			t.Errorf("%d relists after a restart, want 1", n)
		}
		g.Stop()
	})
}

func TestOnePodStuckDoesNotStallTheRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := fakeruntime.New(
			pod("a", ctr("ca", running)),
			pod("stuck", ctr("cs", running)),
			pod("b", ctr("cb", running)),
		)
		rt.SetHang("cs", true)
		cache := podcache.New()
		g := newLoopGenerator(t, rt, cache, func(o *Options) { o.InspectTimeout = 10 * time.Second })
		ch := g.Watch()

		start := time.Now()
		done := make(chan error)
		go func() { done <- g.Relist(t.Context()) }()
		synctest.Wait()
		// The other pods are delivered while the stuck one still waits.
		assertEvents(t, drain(ch), startedEv("a", "ca"), startedEv("b", "cb"))

		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("relist took %v, want the 10s inspection deadline", d)
		}
		if ok, err := g.Healthy(); !ok {
			t.Errorf("unhealthy after a stuck pod: %v", err)
		}
		if _, err := cache.Get("stuck"); !errors.Is(err, ErrInspectTimeout) {
			t.Errorf("stuck pod cached with error %v, want ErrInspectTimeout", err)
		}
		if _, err := cache.Get("stuck"); errors.Is(err, context.DeadlineExceeded) {
			t.Error("the deadline error must not read as the caller's own deadline")
		}
		if n := testutil.ToFloat64(g.metrics.InspectionFailures.WithLabelValues(metrics.InspectionDeadline)); n != 1 {
			t.Errorf("deadline failures = %v, want 1", n)
		}

		// Once the runtime answers, the pod's events come.
		rt.SetHang("cs", false)
		if err := g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		assertEvents(t, drain(ch), startedEv("stuck", "cs"))
	})
}
