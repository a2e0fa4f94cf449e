// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// The payload path must tell what the relist path tells: the same events
// of each container, in the same order, none twice, none missing, and the
// same cache at the end. Each scenario below drives one runtime that two
// generators watch, one applying payloads, one taking events as hints
// alone, with subscribers that read at once. (Across the containers of a
// pod, the payload path tells events in the order the runtime sent them;
// a relist that saw several containers change at once tells them in the
// kubelet's order, which cannot know which came first.)

// twin is a generator and what its subscriber received.
type twin struct {
	g     *Generator
	cache *podcache.Cache
	sub   *Subscription
	got   map[string][]string // by pod and container: event types
}

type twins struct {
	t  *testing.T
	rt *fakeruntime.Runtime
	// pay applies payloads; hint takes events as hints alone.
	pay, hint *twin
}

func newTwins(t *testing.T, pods ...fakeruntime.Pod) *twins {
	t.Helper()
	rt := fakeruntime.New(pods...)
	rt.EnableEvents(true)
	tw := &twins{t: t, rt: rt}
	start := func(hintOnly bool) *twin {
		cache := podcache.New()
		g, err := New(rt, Options{
			RelistPeriod:           time.Second,
			EventedRelistPeriod:    time.Hour,
			EventedRelistThreshold: 2 * time.Hour,
			HintOnly:               hintOnly,
			Cache:                  cache,
			Clock:                  clock.RealClock{},
			Logger:                 slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		x := &twin{g: g, cache: cache, sub: g.Subscribe(), got: make(map[string][]string)}
		g.Start()
		t.Cleanup(func() {
			g.Stop()
			x.sub.Close()
		})
		return x
	}
	tw.pay, tw.hint = start(false), start(true)
	// Let the streams hold and the first relists be done; what they told
	// is the same for both, and not what a scenario is about.
	tw.wait(stream.Hold + 2*time.Second)
	tw.compare()
	clear(tw.pay.got)
	clear(tw.hint.got)
	return tw
}

// collect takes what each subscriber has, as a subscriber reading at once.
func (tw *twins) collect() {
	synctest.Wait()
	for _, x := range []*twin{tw.pay, tw.hint} {
		for {
			e, ok := x.sub.TryNext()
			if !ok {
				break
			}
			k := e.PodUID + "/" + e.ContainerID
			x.got[k] = append(x.got[k], string(e.Type))
		}
	}
}

func (tw *twins) emit(pod, id string, typ runtimeapi.ContainerEventType) {
	tw.rt.Emit(pod, id, typ, time.Time{})
	tw.collect()
}

func (tw *twins) wait(d time.Duration) {
	time.Sleep(d)
	tw.collect()
}

// settle lets the confirming relists and a global relist happen.
func (tw *twins) settle() {
	tw.wait(3 * time.Second)
	tw.pay.g.requestGlobalRelist()
	tw.hint.g.requestGlobalRelist()
	tw.wait(3 * time.Second)
}

// compare checks that both generators told the same and cache the same.
func (tw *twins) compare() {
	tw.t.Helper()
	containers, pods := map[string]bool{}, map[string]bool{}
	for _, x := range []*twin{tw.pay, tw.hint} {
		for k := range x.got {
			containers[k] = true
		}
		for uid := range x.cache.GetAll() {
			pods[uid] = true
		}
	}
	for k := range containers {
		if p, h := tw.pay.got[k], tw.hint.got[k]; !slices.Equal(p, h) {
			tw.t.Errorf("%s:\n payloads %v\n hints    %v", k, p, h)
		}
	}
	for uid := range pods {
		if p, h := cachedState(tw.pay.cache, uid), cachedState(tw.hint.cache, uid); p != h {
			tw.t.Errorf("pod %s cached:\n payloads %s\n hints    %s", uid, p, h)
		}
	}
}

// cachedState is what a cache holds of a pod, as comparable text.
func cachedState(c *podcache.Cache, uid string) string {
	e, ok := c.GetEntry(uid)
	if !ok {
		return "absent"
	}
	var parts []string
	for _, s := range e.Status.Sandboxes {
		parts = append(parts, fmt.Sprintf("sandbox %s %v", s.GetId(), s.GetState()))
	}
	cs := slices.Clone(e.Status.Containers)
	slices.SortFunc(cs, func(a, b *runtimeapi.ContainerStatus) int { return cmp.Compare(a.GetId(), b.GetId()) })
	for _, s := range cs {
		parts = append(parts, fmt.Sprintf("%s %v exit %d", s.GetId(), s.GetState(), s.GetExitCode()))
	}
	return fmt.Sprintf("%s err=%v ips=%v", strings.Join(parts, ", "), e.Err, e.Status.IPs)
}

const (
	started = string(ContainerStarted)
	died    = string(ContainerDied)
	removed = string(ContainerRemoved)
)

func TestPayloadsTellWhatRelistsTell(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []fakeruntime.Pod
		run  func(tw *twins)
		// want is what both must tell, by pod and container.
		want map[string][]string
	}{
		{
			name: "a container restarts",
			pods: []fakeruntime.Pod{webPod(ctr("c1", running), ctr("side", running))},
			run: func(tw *twins) {
				for i := range 3 {
					old := "c1"
					if i > 0 {
						old = fmt.Sprintf("c1-%d", i)
					}
					next := fmt.Sprintf("c1-%d", i+1)
					_ = tw.rt.SetContainerState(old, exited, 137)
					tw.emit("web", old, evStopped)
					tw.rt.Remove(old)
					tw.emit("web", old, evDeleted)
					tw.rt.AddContainer(webPod(), fakeruntime.Container{ID: next, Name: "c1", State: created})
					tw.emit("web", next, evCreated)
					_ = tw.rt.SetContainerState(next, running, 0)
					tw.emit("web", next, evStarted)
				}
			},
			want: map[string][]string{
				"web/c1": {died, removed}, "web/c1-1": {started, died, removed},
				"web/c1-2": {started, died, removed}, "web/c1-3": {started},
			},
		},
		{
			name: "created, started, stopped and removed between two relists",
			pods: []fakeruntime.Pod{webPod(ctr("c1", running))},
			run: func(tw *twins) {
				tw.rt.AddContainer(webPod(), fakeruntime.Container{ID: "job", Name: "job", State: created})
				tw.emit("web", "job", evCreated)
				_ = tw.rt.SetContainerState("job", running, 0)
				tw.emit("web", "job", evStarted)
				_ = tw.rt.SetContainerState("job", exited, 0)
				tw.emit("web", "job", evStopped)
				tw.rt.Remove("job")
				tw.emit("web", "job", evDeleted)
			},
			want: map[string][]string{"web/job": {started, died, removed}},
		},
		{
			name: "a start whose payload already shows the exit",
			pods: []fakeruntime.Pod{webPod(ctr("c1", running))},
			run: func(tw *twins) {
				tw.rt.AddContainer(webPod(), fakeruntime.Container{ID: "job", Name: "job", State: exited, ExitCode: 2})
				tw.emit("web", "job", evStarted)
				tw.emit("web", "job", evStopped)
			},
			want: map[string][]string{"web/job": {started, died}},
		},
		{
			name: "lost events",
			pods: []fakeruntime.Pod{webPod(ctr("c1", running), ctr("c2", running))},
			run: func(tw *twins) {
				// c1's STOPPED never comes; its DELETED does.
				_ = tw.rt.SetContainerState("c1", exited, 1)
				tw.rt.Remove("c1")
				tw.emit("web", "c1", evDeleted)
				// c2's stop comes with no event at all: the safety net finds it.
				_ = tw.rt.SetContainerState("c2", exited, 0)
			},
			want: map[string][]string{"web/c1": {died, removed}, "web/c2": {died}},
		},
		{
			name: "DELETED before STOPPED",
			pods: []fakeruntime.Pod{webPod(ctr("c1", running))},
			run: func(tw *twins) {
				_ = tw.rt.SetContainerState("c1", exited, 1)
				tw.rt.Remove("c1")
				tw.emit("web", "c1", evDeleted)
				tw.emit("web", "c1", evStopped)
			},
			want: map[string][]string{"web/c1": {died, removed}},
		},
		{
			name: "replayed backlog",
			pods: []fakeruntime.Pod{webPod(ctr("c1", running))},
			run: func(tw *twins) {
				old := time.Now().Add(-4 * time.Minute)
				tw.rt.Emit("web", "ghost", evStarted, old)
				tw.rt.Emit("web", "ghost", evDeleted, old)
				tw.rt.Emit("web", "c1", evStopped, old)
				tw.collect()
				_ = tw.rt.SetContainerState("c1", exited, 0)
				tw.emit("web", "c1", evStopped)
			},
			want: map[string][]string{"web/c1": {died}},
		},
		{
			name: "the stream is cut mid-burst",
			pods: []fakeruntime.Pod{webPod(ctr("c1", running), ctr("c2", running), ctr("c3", running))},
			run: func(tw *twins) {
				_ = tw.rt.SetContainerState("c1", exited, 1)
				tw.emit("web", "c1", evStopped)
				tw.rt.EndStreams(errors.New("transport is closing"))
				_ = tw.rt.SetContainerState("c2", exited, 2)
				tw.rt.Remove("c1")
				tw.collect()
				tw.wait(10 * time.Second)
				_ = tw.rt.SetContainerState("c3", exited, 3)
				tw.emit("web", "c3", evStopped)
			},
			want: map[string][]string{"web/c1": {died, removed}, "web/c2": {died}, "web/c3": {died}},
		},
		{
			name: "a pod comes and goes",
			run: func(tw *twins) {
				job := fakeruntime.Pod{UID: "job", Name: "job", Namespace: "batch",
					Sandboxes:  []fakeruntime.Sandbox{{ID: "jsb", State: ready}},
					Containers: []fakeruntime.Container{{ID: "jc", Name: "run", State: created}}}
				tw.rt.AddPod(job)
				tw.emit("job", "jsb", evCreated)
				tw.emit("job", "jsb", evStarted)
				tw.emit("job", "jc", evCreated)
				_ = tw.rt.SetContainerState("jc", running, 0)
				tw.emit("job", "jc", evStarted)
				_ = tw.rt.SetContainerState("jc", exited, 0)
				tw.emit("job", "jc", evStopped)
				tw.rt.Remove("jc")
				tw.emit("job", "jc", evDeleted)
				tw.rt.RemovePod("job")
				tw.emit("job", "jsb", evStopped)
				tw.emit("job", "jsb", evDeleted)
			},
			want: map[string][]string{"job/jsb": {started, died, removed}, "job/jc": {started, died, removed}},
		},
	} {
		// With lists that answer at once, every relist a hint asks for
		// sees each step; with lists that take a second, the relists come
		// late and the hints must fill in what they missed.
		for _, latency := range []time.Duration{0, time.Second} {
			t.Run(fmt.Sprintf("%s/lists in %v", tc.name, latency), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tw := newTwins(t, tc.pods...)
					tw.rt.SetLatency(runtime.OpListPodSandbox, latency)
					tc.run(tw)
					tw.settle()
					tw.compare()
					// With lists that answer at once, no relist is listing when
					// an event comes: payloads are applied.
					if latency == 0 && testutil.ToFloat64(tw.pay.g.metrics.PayloadsApplied) == 0 {
						t.Error("no payload was applied: the comparison shows nothing")
					}
					for k, want := range tc.want {
						if got := tw.pay.got[k]; !slices.Equal(got, want) {
							t.Errorf("%s: %v, want %v", k, got, want)
						}
					}
					if len(tw.pay.got) != len(tc.want) {
						t.Errorf("events of %d containers, want %d: %v", len(tw.pay.got), len(tc.want), tw.pay.got)
					}
				})
			})
		}
	}
}

// TestPayloadsArriveBeforeTheRelist: the payload's events are delivered
// and cached at once, while the relist of the pod is still listing; the
// confirming relist then finds nothing new.
func TestPayloadsArriveBeforeTheRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
		e.settle()
		e.rt.SetLatency(runtime.OpListPodSandbox, time.Hour)
		_ = e.rt.SetContainerState("c1", exited, 7)
		e.emit("web", "c1", evStopped)
		if !slices.Equal(e.got, []ev{diedEv("web", "c1")}) {
			t.Fatalf("events %v before the relist, want Died(c1)", e.got)
		}
		if st, _ := e.g.Cache().Get("web"); st.FindContainerByID("c1").GetExitCode() != 7 {
			t.Error("the cache does not hold the exit before the event is delivered")
		}
		if n := testutil.ToFloat64(e.g.metrics.PayloadsApplied); n != 1 {
			t.Errorf("%v payloads applied, want 1", n)
		}
		e.rt.SetLatency(runtime.OpListPodSandbox, 0)
		e.wait(2 * time.Hour)
		if len(e.got) != 1 {
			t.Errorf("the confirming relist told %v again", e.got[1:])
		}
	})
}

// TestOtherPodsDoNotWaitForAPodsRelist: while a pod's confirming relist
// waits on the runtime, the events of other pods are applied at once, and
// so are the pod's own: its lists, which may be older than their payloads,
// are thrown away and the pod relisted afresh, which tells nothing again.
func TestOtherPodsDoNotWaitForAPodsRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := fakeruntime.Pod{UID: "db", Name: "db", Namespace: "shop",
			Sandboxes: []fakeruntime.Sandbox{{ID: "dbsb", State: ready}}, Containers: []fakeruntime.Container{ctr("d1", running)}}
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)), db)
		e.settle()
		e.rt.SetLatency(runtime.OpListPodSandbox, time.Hour)
		_ = e.rt.SetContainerState("c1", exited, 1)
		e.emit("web", "c1", evStopped) // web's confirming relist now lists for an hour
		_ = e.rt.SetContainerState("d1", exited, 2)
		e.emit("db", "d1", evStopped)
		if want := []ev{diedEv("web", "c1"), diedEv("db", "d1")}; !slices.Equal(e.got, want) {
			t.Fatalf("events %v while web's relist lists, want %v", e.got, want)
		}
		if st, _ := e.g.Cache().Get("db"); st.FindContainerByID("d1").GetExitCode() != 2 {
			t.Error("db's cache entry does not hold the exit told")
		}
		e.rt.Remove("c1")
		e.emit("web", "c1", evDeleted)
		if want := []ev{diedEv("web", "c1"), diedEv("db", "d1"), removedEv("web", "c1")}; !slices.Equal(e.got, want) {
			t.Fatalf("events %v while web's relist lists, want %v", e.got, want)
		}
		if n := testutil.ToFloat64(e.g.metrics.PayloadFallbacks.WithLabelValues(fallbackOvertaken)); n != 0 {
			t.Errorf("%v events overtaken, want none", n)
		}
		relists := testutil.ToFloat64(e.g.metrics.PodRelists)
		e.rt.SetLatency(runtime.OpListPodSandbox, 0)
		e.wait(2 * time.Hour)
		if want := []ev{diedEv("web", "c1"), diedEv("db", "d1"), removedEv("web", "c1")}; !slices.Equal(e.got, want) {
			t.Errorf("events %v, want %v", e.got, want)
		}
		// web's lists in flight, thrown away, then web relisted afresh; the
		// global relist of the hour served db's confirmation.
		if n := testutil.ToFloat64(e.g.metrics.PodRelists) - relists; n != 2 {
			t.Errorf("%v relists of pods after the runtime answered, want 2", n)
		}
		if st, _ := e.g.Cache().Get("web"); st.FindContainerByID("c1") != nil {
			t.Errorf("web's cache entry still has c1: %v", st)
		}
	})
}

// TestOtherPodsDoNotWaitForAPodsInspection: the same while a pod's relist
// waits for its status calls.
func TestOtherPodsDoNotWaitForAPodsInspection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := fakeruntime.Pod{UID: "db", Name: "db", Namespace: "shop",
			Sandboxes: []fakeruntime.Sandbox{{ID: "dbsb", State: ready}}, Containers: []fakeruntime.Container{ctr("d1", running)}}
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)), db)
		e.settle()
		e.rt.SetHang("c1", true)
		_ = e.rt.SetContainerState("c1", exited, 1)
		// Backlog: a hint, whose relist finds c1 exited and inspects web.
		e.rt.Emit("web", "c1", evStopped, time.Now().Add(-time.Minute))
		synctest.Wait()
		_ = e.rt.SetContainerState("d1", exited, 2)
		e.emit("db", "d1", evStopped)
		if want := []ev{diedEv("db", "d1")}; !slices.Equal(e.got, want) {
			t.Fatalf("events %v while web's status calls hang, want %v", e.got, want)
		}
		// Its inspection passes its deadline; the next global relist
		// inspects it again.
		e.rt.SetHang("c1", false)
		e.wait(2 * time.Hour)
		if want := []ev{diedEv("db", "d1"), diedEv("web", "c1")}; !slices.Equal(e.got, want) {
			t.Errorf("events %v, want %v", e.got, want)
		}
	})
}

// TestDeletedDuringAPodsListIsTold: a DELETED that comes while a pod's
// lists are in flight, lists that still show the container, is kept for
// the relist that finds it gone: that removal was told, and three such
// must not make the stream one that does not tell removals.
func TestDeletedDuringAPodsListIsTold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running), ctr("c2", running), ctr("c3", running)))
		e.settle()
		// Removals count as untold only from a global relist after the
		// stream connected; the first one may have raced with it.
		e.wait(90 * time.Minute)
		var want []ev
		for _, id := range []string{"c1", "c2", "c3"} {
			e.rt.SetLatency(runtime.OpListContainers, time.Minute)
			_ = e.rt.SetContainerState(id, exited, 0)
			e.emit("web", id, evStopped) // its confirming relist lists for a minute
			// Its DELETED comes while the runtime still lists it, as when
			// the list was answered just before the removal.
			e.emit("web", id, evDeleted)
			e.wait(time.Minute + time.Second) // the lists show it; the next relist lists
			e.rt.Remove(id)
			e.rt.SetLatency(runtime.OpListContainers, 0)
			e.wait(2 * time.Minute) // the next relist finds it gone
			want = append(want, diedEv("web", id), removedEv("web", id))
		}
		if !slices.Equal(e.got, want) {
			t.Errorf("events %v, want %v", e.got, want)
		}
		if u := e.g.Status().UntoldRemovals; len(u) > 0 {
			t.Errorf("removals the stream told were taken for untold ones: %q", u)
		}
	})
}

// TestStoppedBeforeStarted: a container that exits at once may have its
// STOPPED sent before its STARTED (CRI-O does): its payload shows that it
// ran, so it is told Started and Died, in that order, and the late
// STARTED tells nothing more.
func TestStoppedBeforeStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
		e.settle()
		e.rt.AddContainer(webPod(), fakeruntime.Container{ID: "c2", Name: "flash", SandboxID: "sb", State: created})
		e.emit("web", "c2", evCreated)
		_ = e.rt.SetContainerState("c2", exited, 0)
		e.emit("web", "c2", evStopped)
		e.emit("web", "c2", evStarted)
		e.wait(time.Minute)
		if want := []ev{startedEv("web", "c2"), diedEv("web", "c2")}; !slices.Equal(e.got, want) {
			t.Errorf("events %v, want %v", e.got, want)
		}
	})
}

// TestPayloadNeverMovesAPodBack: a stale payload, as a late or reordered
// event brings, changes nothing that is known newer.
func TestPayloadNeverMovesAPodBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
		e.settle()
		// A STARTED carrying c1 running, sent before it exited, arrives
		// after the exit was applied.
		stale := &runtimeapi.ContainerEventResponse{
			ContainerId: "c1", ContainerEventType: evStarted, CreatedAt: time.Now().UnixNano(),
			PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Id: "sb", State: ready, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "web", Name: "web", Namespace: "shop"}},
			ContainersStatuses: []*runtimeapi.ContainerStatus{{Id: "c1", State: running, Metadata: &runtimeapi.ContainerMetadata{Name: "name-c1"}}},
		}
		_ = e.rt.SetContainerState("c1", exited, 1)
		e.emit("web", "c1", evStopped)
		streamSide{e.g}.Deliver(stale, time.Now().Add(-time.Minute))
		e.wait(time.Second)
		if !slices.Equal(e.got, []ev{diedEv("web", "c1")}) {
			t.Errorf("events %v, want Died(c1) alone", e.got)
		}
		if st, _ := e.g.Cache().Get("web"); st.FindContainerByID("c1").GetState() != exited {
			t.Error("the stale payload moved c1 back to running in the cache")
		}
	})
}

// TestPartialPayloadsFallBack: payloads that are partial or contradict
// their event take the relist path, counted by reason.
func TestPartialPayloadsFallBack(t *testing.T) {
	sandbox := func() *runtimeapi.PodSandboxStatus {
		return &runtimeapi.PodSandboxStatus{Id: "sb", State: ready, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "web", Name: "web", Namespace: "shop"}}
	}
	status := func(id string, s runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{Id: id, State: s, Metadata: &runtimeapi.ContainerMetadata{Name: "name-" + id}}
	}
	for _, tc := range []struct {
		name   string
		ev     *runtimeapi.ContainerEventResponse
		reason string
	}{
		{"no sandbox status", &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: evStopped,
			ContainersStatuses: []*runtimeapi.ContainerStatus{status("c1", exited)}}, fallbackNoSandbox},
		{"the subject's status missing", &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: evStopped,
			PodSandboxStatus: sandbox()}, fallbackNoSubject},
		{"a STOPPED whose container still runs", &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: evStopped,
			PodSandboxStatus: sandbox(), ContainersStatuses: []*runtimeapi.ContainerStatus{status("c1", running)}}, fallbackContradict},
		{"a status without metadata", &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: evStopped,
			PodSandboxStatus: sandbox(), ContainersStatuses: []*runtimeapi.ContainerStatus{{Id: "c1", State: exited}}}, fallbackMalformed},
		{"an event type CRI does not define", &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: 9,
			PodSandboxStatus: sandbox(), ContainersStatuses: []*runtimeapi.ContainerStatus{status("c1", exited)}}, fallbackMalformed},
		{"a DELETED of an ID no one knows", &runtimeapi.ContainerEventResponse{ContainerId: "stranger", ContainerEventType: evDeleted}, fallbackNoPod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
				e.settle()
				_ = e.rt.SetContainerState("c1", exited, 1)
				streamSide{e.g}.Deliver(tc.ev, time.Now().Add(-time.Minute))
				e.wait(time.Second)
				if n := testutil.ToFloat64(e.g.metrics.PayloadFallbacks.WithLabelValues(tc.reason)); n != 1 {
					t.Errorf("fallbacks{reason=%s} = %v, want 1", tc.reason, n)
				}
				if n := testutil.ToFloat64(e.g.metrics.PayloadsApplied); n != 0 {
					t.Errorf("%v payloads applied", n)
				}
				// The relist path still tells the truth, where it knows the pod.
				if tc.reason != fallbackNoPod && !slices.Equal(e.got, []ev{diedEv("web", "c1")}) {
					t.Errorf("events %v, want Died(c1) from the relist", e.got)
				}
			})
		})
	}
}

// TestEventDuringAPodsInspectionWaits: once a pod's lists are back and its
// relist inspects the pod, the pod's events wait for that relist to end:
// their payloads must not move the record the inspection will advance.
// Then the payloads apply, in order; they do not wait, as hints, for
// another relist of the pod.
func TestEventDuringAPodsInspectionWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
		e.settle()
		// The relist c1's event asks for inspects the pod, for 5 s.
		e.g.RequestReinspect("web")
		e.rt.SetLatency(runtime.OpPodSandboxStatus, 5*time.Second)
		_ = e.rt.SetContainerState("c1", exited, 1)
		e.emit("web", "c1", evStopped)
		e.wait(time.Second)
		e.rt.Remove("c1")
		e.emit("web", "c1", evDeleted)
		if want := []ev{diedEv("web", "c1")}; !slices.Equal(e.got, want) {
			t.Fatalf("events %v while web is inspected, want %v", e.got, want)
		}
		applied := testutil.ToFloat64(e.g.metrics.PayloadsApplied)
		e.rt.SetLatency(runtime.OpPodSandboxStatus, 0)
		e.wait(5 * time.Minute)
		if n := testutil.ToFloat64(e.g.metrics.PayloadsApplied) - applied; n != 1 {
			t.Errorf("%v payloads applied once the inspection ended, want c1's DELETED", n)
		}
		for _, reason := range fallbackReasons {
			if n := testutil.ToFloat64(e.g.metrics.PayloadFallbacks.WithLabelValues(reason)); n != 0 {
				t.Errorf("%v events taken as hints (%s), want none", n, reason)
			}
		}
		// The PodSync the re-inspection asked for, and the removal, once.
		want := []ev{diedEv("web", "c1"), removedEv("web", "c1"), podSyncEv("web")}
		if got := reduce(toEvents(e.got)); !slices.Equal(got, reduce(toEvents(want))) {
			t.Errorf("events %v, want %v", e.got, want)
		}
	})
}

// TestEventsDuringAGlobalRelistsLists: while a global relist waits for the
// runtime's lists, events are applied at once instead of waiting for it.
// What the lists then say of their pods may be older than the payloads:
// the relist leaves those pods to relists of their own, and reconciles the
// others.
func TestEventsDuringAGlobalRelistsLists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		web := func(c1 runtimeapi.ContainerState) fakeruntime.Pod { return webPod(ctr("c1", c1)) }
		db := fakeruntime.Pod{UID: "db", Name: "db", Namespace: "shop",
			Sandboxes: []fakeruntime.Sandbox{{ID: "dbsb", State: ready}}, Containers: []fakeruntime.Container{ctr("d1", running)}}
		e := newEventedEnv(t, ModeAuto, web(running), db)
		e.settle()
		watch := e.g.Watch()
		// d1 exits untold; the global relist's container list takes a
		// minute, and answers what the runtime held when it was asked.
		db.Containers[0].State = exited
		e.rt.SetPods(web(running), db)
		e.rt.SetLatency(runtime.OpListContainers, time.Minute)
		e.g.requestGlobalRelist()
		e.wait(time.Second)
		// c1 exits as they list: the lists hold it running.
		e.rt.SetPods(web(exited), db)
		e.emit("web", "c1", evStopped)
		if want := []ev{diedEv("web", "c1")}; !slices.Equal(e.got, want) {
			t.Fatalf("events %v while the global relist lists, want %v", e.got, want)
		}
		e.rt.SetLatency(runtime.OpListContainers, 0)
		e.wait(2 * time.Minute)
		// db's exit from the global relist; web's nothing more, not a
		// Started from the lists older than its payload.
		if want := []ev{diedEv("web", "c1"), diedEv("db", "d1")}; !slices.Equal(e.got, want) {
			t.Errorf("events %v, want %v", e.got, want)
		}
		if st, _ := e.g.Cache().Get("web"); st.FindContainerByID("c1").GetState() != exited {
			t.Errorf("web's cache entry: %v", st)
		}
		// The kubelet's channel, which folds nothing, got nothing more
		// either: no Started from web's older lists, which a subscriber
		// would fold away.
		assertEvents(t, drain(watch), diedEv("db", "d1"), diedEv("web", "c1"))
	})
}
