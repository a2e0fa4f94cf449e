// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// downRuntime is a runtime that can go down: every call fails while down.
type downRuntime struct {
	*fakeruntime.Runtime
	down atomic.Bool
}

var errDown = status.Error(codes.Unavailable, "connection refused")

func (r *downRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if r.down.Load() {
		return nil, errDown
	}
	return r.Runtime.ListPodSandbox(ctx, f)
}

func (r *downRuntime) GetContainerEvents(ctx context.Context) (runtime.EventStream, error) {
	if r.down.Load() {
		return nil, errDown
	}
	return r.Runtime.GetContainerEvents(ctx)
}

// TestStreamBackAsSoonAsTheRuntime: measured on containerd, after it was
// down 34 s lists succeeded again at once but the stream stayed down more
// than 8 s, because its backoff had grown. The first list that succeeds
// retries it.
func TestStreamBackAsSoonAsTheRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &downRuntime{Runtime: fakeruntime.New(webPod(ctr("c1", running)))}
		rt.EnableEvents(true)
		g := newLoopGenerator(t, rt, podcache.New(), func(o *Options) { o.RelistPeriod = time.Second })
		g.Start()
		defer g.Stop()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if !g.Status().Evented {
			t.Fatal("not evented before the outage")
		}

		rt.down.Store(true)
		rt.EndStreams(errDown)
		time.Sleep(34 * time.Second)
		synctest.Wait()
		if s := g.Status(); s.StreamConnected || s.ListFailingSince.IsZero() {
			t.Fatalf("during the outage: %+v", s)
		}
		back := time.Now()
		rt.down.Store(false)
		// The next relist, a period later, finds the runtime back.
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		s := g.Status()
		if !s.StreamConnected || s.StreamSince.Sub(back) > time.Second+time.Millisecond {
			t.Errorf("stream connected %v since %v, %v after the runtime came back; want within the relist period", s.StreamConnected, s.StreamSince, s.StreamSince.Sub(back))
		}
	})
}

// TestFailedRelistIsRetried: while events drive, a pod whose relist
// failed, its lists or its inspection, is relisted again after a backoff:
// its events come within seconds, and its cache entry is confirmed, not a
// safety-net period (an hour here) late.
func TestFailedRelistIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       fakeruntime.Op
		failures int
		// within is how long the retries may take: a second failure of the
		// lists waits for the probe's pace, as the runtime may be down.
		within time.Duration
	}{
		{"inspection fails twice", runtime.OpContainerStatus, 2, time.Second},
		{"the pod's lists fail once", runtime.OpListContainers, 1, time.Second},
		{"the pod's lists fail twice", runtime.OpListContainers, 2, stream.RetryCap + 2*time.Second},
	} {
		for _, path := range eventPaths {
			t.Run(tc.name+"/"+path.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newEventedEnvWith(t, path.opt, webPod(ctr("c1", running)))
					e.settle()
					_ = e.rt.SetContainerState("c1", exited, 3)
					for range tc.failures {
						e.rt.InjectError(tc.op, status.Error(codes.Unavailable, "busy"))
					}
					e.emit("web", "c1", evStopped)
					e.wait(tc.within)
					if want := []ev{diedEv("web", "c1")}; !slices.Equal(e.got, want) {
						t.Errorf("events %v, want %v", e.got, want)
					}
					retries := tc.failures
					if tc.op == runtime.OpContainerStatus && path.name == "payloads" {
						// The payload moved the record: the relist that
						// confirms it finds nothing to inspect.
						retries = 0
					}
					if got := testutil.ToFloat64(e.g.metrics.InspectionRetries); got != float64(retries) {
						t.Errorf("%v retries, want %d", got, retries)
					}
					s := e.g.Status()
					if len(s.FailingPods) > 0 || !s.ListFailingSince.IsZero() {
						t.Errorf("still failing: %+v", s)
					}
					// The relist, not only the payload, wrote the cache.
					if st, _ := e.g.Cache().Get("web"); st.FindContainerByID("c1").GetExitCode() != 3 {
						t.Errorf("cache %v", st)
					}
					if n := e.g.stream.Sizes().Retries; n != 0 {
						t.Errorf("%d retries pending", n)
					}
				})
			})
		}
	}
}

// TestRetriesWhileTheRuntimeFails: while the runtime's lists fail (and its
// event stream holds), the pods whose relists failed wait: one retry in
// stream.RetryCap probes the runtime, not each pod at its own pace. When
// it answers again, every pod's events come within a few seconds.
func TestRetriesWhileTheRuntimeFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pods = 20
		var all []fakeruntime.Pod
		for i := range pods {
			uid := fmt.Sprintf("p%02d", i)
			all = append(all, fakeruntime.Pod{UID: uid, Name: uid, Namespace: "ns",
				Sandboxes:  []fakeruntime.Sandbox{{ID: "sb-" + uid, State: ready}},
				Containers: []fakeruntime.Container{{ID: "c-" + uid, Name: "app", SandboxID: "sb-" + uid, State: running}}})
		}
		e := newEventedEnvWith(t, hintOnly, all...)
		e.settle()
		e.rt.SetOpError(runtime.OpListPodSandbox, status.Error(codes.Unavailable, "down"))
		e.rt.ResetCalls()
		var want []ev
		for _, p := range all {
			id := p.Containers[0].ID
			_ = e.rt.SetContainerState(id, exited, 1)
			e.emit(p.UID, id, evStopped)
			want = append(want, diedEv(p.UID, id))
		}
		e.wait(time.Minute)
		t.Logf("%d lists in a minute", e.rt.Calls(runtime.OpListPodSandbox))
		// Each pod's relist, then a probe every 4 to 6 s.
		if n := e.rt.Calls(runtime.OpListPodSandbox); n > pods+int(time.Minute/(4*time.Second))+1 {
			t.Errorf("%d lists in a minute of a runtime down, for %d pods", n, pods)
		}
		if n := e.g.stream.Sizes().Retries; n > pods {
			t.Errorf("%d retries pending for %d pods", n, pods)
		}
		if len(e.got) > 0 {
			t.Errorf("events while the runtime is down: %v", e.got)
		}

		e.rt.SetOpError(runtime.OpListPodSandbox, nil)
		e.wait(2*stream.RetryCap + time.Second)
		slices.SortFunc(e.got, func(a, b ev) int { return compareEv(a, b) })
		if !slices.Equal(e.got, want) {
			t.Errorf("events once the runtime answers:\n got  %v\n want %v", e.got, want)
		}
	})
}

func compareEv(a, b ev) int {
	switch {
	case a.pod < b.pod:
		return -1
	case a.pod > b.pod:
		return 1
	}
	return 0
}
