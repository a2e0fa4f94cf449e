// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// The scenarios of the kubelet's generic PLEG tests, rewritten.

func TestRelisting(t *testing.T) {
	e := newEnv(t, fakeruntime.New(
		pod("1234", ctr("c1", exited), ctr("c2", running), ctr("c3", unknown)),
		pod("4567", ctr("c1", exited)),
	))
	// The unknown container says nothing.
	assertEvents(t, e.relist(), diedEv("1234", "c1"), startedEv("1234", "c2"), diedEv("4567", "c1"))
	assertEvents(t, e.relist())

	e.rt.SetPods(
		pod("1234", ctr("c2", exited), ctr("c3", running)),
		pod("4567", ctr("c4", running)),
	)
	assertEvents(t, e.relist(),
		removedEv("1234", "c1"), diedEv("1234", "c2"), startedEv("1234", "c3"),
		removedEv("4567", "c1"), startedEv("4567", "c4"))
}

func TestRelistingWithSandboxes(t *testing.T) {
	// CRI has no unknown sandbox state: a value it does not define stands in.
	const unknownSandbox = runtimeapi.PodSandboxState(7)
	e := newEnv(t, fakeruntime.New(
		sandboxPod("1234", sbx("c1", notReady), sbx("c2", ready), sbx("c3", unknownSandbox)),
		sandboxPod("4567", sbx("c1", notReady)),
	))
	assertEvents(t, e.relist(), diedEv("1234", "c1"), startedEv("1234", "c2"), diedEv("4567", "c1"))
	assertEvents(t, e.relist())

	e.rt.SetPods(
		sandboxPod("1234", sbx("c2", notReady), sbx("c3", ready)),
		sandboxPod("4567", sbx("c4", ready)),
	)
	events := e.relist()
	assertEvents(t, events,
		removedEv("1234", "c1"), diedEv("1234", "c2"), startedEv("1234", "c3"),
		removedEv("4567", "c1"), startedEv("4567", "c4"))
	for _, ev := range events {
		if !ev.Sandbox || ev.ContainerName != "" {
			t.Errorf("event %+v: want Sandbox set and no container name", ev)
		}
	}
}

func TestEventChannelFull(t *testing.T) {
	e := newEnv(t, fakeruntime.New(
		pod("1234", ctr("c1", exited), ctr("c2", running), ctr("c3", unknown)),
		pod("4567", ctr("c1", exited)),
	), withCapacity(4))
	assertEvents(t, e.relist(), diedEv("1234", "c1"), startedEv("1234", "c2"), diedEv("4567", "c1"))

	e.rt.SetPods(
		pod("1234", ctr("c2", exited), ctr("c3", running)),
		pod("4567", ctr("c4", running)),
	)
	all := []ev{
		removedEv("1234", "c1"), diedEv("1234", "c2"), startedEv("1234", "c3"),
		removedEv("4567", "c1"), startedEv("4567", "c4"),
	}
	got := reduce(e.relist())
	if len(got) != 4 {
		t.Fatalf("got %d events %v, want 4 of %v", len(got), got, all)
	}
	for _, g := range got {
		if !slices.Contains(all, g) {
			t.Errorf("unexpected event %v", g)
		}
	}
	if n := testutil.ToFloat64(e.g.metrics.DiscardEvents); n != 1 {
		t.Errorf("kubelet_pleg_discard_events = %v, want 1", n)
	}
	// As in the kubelet, a discarded event is lost: the record moved on.
	assertEvents(t, e.relist())
}

func TestDetectingContainerDeaths(t *testing.T) {
	// Whether the generator saw the pods once or several times before must
	// not matter.
	for _, warmups := range []int{1, 3} {
		t.Run("missing containers", func(t *testing.T) {
			e := newEnv(t, fakeruntime.New(pod("1234", ctr("c1", running), ctr("c2", running), ctr("c3", exited))))
			for range warmups {
				e.relist()
			}
			e.rt.SetPods(pod("1234", ctr("c1", running)))
			assertEvents(t, e.relist(), diedEv("1234", "c2"), removedEv("1234", "c2"), removedEv("1234", "c3"))
		})
		t.Run("missing pods", func(t *testing.T) {
			e := newEnv(t, fakeruntime.New(pod("1234", ctr("c2", running))))
			for range warmups {
				e.relist()
			}
			e.rt.SetPods()
			assertEvents(t, e.relist(), diedEv("1234", "c2"), removedEv("1234", "c2"))
		})
	}
}

func TestRelistWithCache(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("p0", ctr("c0", running)), pod("p1", ctr("c1", running))))
	failure := errors.New("inspection failed")
	e.rt.SetItemError("c1", failure)

	assertEvents(t, e.relist(), startedEv("p0", "c0"))
	st, err := e.cache.Get("p0")
	if err != nil || st.FindContainerByID("c0") == nil {
		t.Errorf("p0 cached as (%v, %v), want its status and no error", st, err)
	}
	st, err = e.cache.Get("p1")
	if !errors.Is(err, failure) || st == nil || st.UID != "p1" {
		t.Errorf("p1 cached as (%v, %v), want its partial status and the inspection error", st, err)
	}

	// The failed pod's change is detected again once it can be inspected.
	e.rt.SetItemError("c1", nil)
	assertEvents(t, e.relist(), startedEv("p1", "c1"))
	st, err = e.cache.Get("p1")
	if err != nil || st.FindContainerByID("c1").GetState() != running {
		t.Errorf("p1 cached as (%v, %v), want its running container", st, err)
	}
}

func TestRemoveCacheEntry(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("1234", ctr("c1", running))))
	e.relist()
	if _, ok := e.cache.GetEntry("1234"); !ok {
		t.Fatal("pod not cached after first relist")
	}
	e.rt.SetPods()
	e.relist()
	status, err := e.cache.Get("1234")
	if err != nil || status.UID != "1234" || len(status.Containers)+len(status.Sandboxes) != 0 {
		t.Errorf("Get after removal = (%+v, %v), want the empty status", status, err)
	}
	if _, ok := e.cache.GetEntry("1234"); ok {
		t.Error("entry still cached")
	}
	if len(e.g.st.records) != 0 {
		t.Errorf("%d records left, want none", len(e.g.st.records))
	}
}

func TestHealthy(t *testing.T) {
	e := newEnv(t, fakeruntime.New())
	check := func(want bool, wantErr string) {
		t.Helper()
		ok, err := e.g.Healthy()
		if ok != want {
			t.Errorf("Healthy() = %v, want %v (err %v)", ok, want, err)
		}
		if got := errString(err); got != wantErr {
			t.Errorf("Healthy() error = %q, want %q", got, wantErr)
		}
	}
	check(false, "pleg has yet to be successful")
	e.clock.Step(10 * time.Minute)
	check(false, "pleg has yet to be successful")

	if err := e.g.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(time.Minute)
	check(true, "")
	// The threshold itself is still healthy: the comparison is strict.
	e.clock.Step(2 * time.Minute)
	check(true, "")
	e.clock.Step(time.Second)
	check(false, "pleg was last seen active 3m1s ago; threshold is 3m0s")

	// A failed relist does not count as activity.
	e.rt.InjectError(runtime.OpListPodSandbox, errors.New("runtime down"))
	if err := e.g.Relist(t.Context()); err == nil {
		t.Fatal("Relist succeeded with a failing runtime")
	}
	check(false, "pleg was last seen active 3m1s ago; threshold is 3m0s")
	if err := e.g.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	check(true, "")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestLastSeenUpdatedByRelist(t *testing.T) {
	e := newEnv(t, fakeruntime.New())
	e.relist()
	want := float64(e.clock.Now().Unix())
	// Set by the relist itself: nobody called Healthy.
	if got := testutil.ToFloat64(e.g.metrics.LastSeen); got != want {
		t.Errorf("kubelet_pleg_last_seen_seconds = %v, want %v", got, want)
	}
	e.rt.InjectError(runtime.OpListContainers, errors.New("down"))
	e.clock.Step(time.Minute)
	_ = e.g.Relist(t.Context())
	if got := testutil.ToFloat64(e.g.metrics.LastSeen); got != want {
		t.Errorf("after a failed relist kubelet_pleg_last_seen_seconds = %v, want %v", got, want)
	}
}

func TestReinspect(t *testing.T) {
	failure := errors.New("inspection failed")
	for _, tc := range []struct {
		name string
		// listed: the pod is listed on both relists; deleted: it is gone
		// at the second.
		listed, deleted bool
		flag            bool
		fail            bool
		wantInspected   bool
		wantFlagAfter   bool
		wantEvents      []ev
	}{
		{name: "unlisted pod, flagged", flag: true},
		{name: "listed pod, not flagged", listed: true},
		{name: "listed pod, flagged, success", listed: true, flag: true, wantInspected: true, wantEvents: []ev{podSyncEv("p1")}},
		{name: "listed pod, flagged, failure", listed: true, flag: true, fail: true, wantInspected: true, wantFlagAfter: true},
		{name: "deleted pod, flagged", listed: true, deleted: true, flag: true, wantEvents: []ev{diedEv("p1", "c1"), removedEv("p1", "c1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := fakeruntime.New()
			if tc.listed {
				rt.SetPods(pod("p1", ctr("c1", running)))
			}
			e := newEnv(t, rt)
			e.relist()
			if tc.deleted {
				rt.SetPods()
			}
			if tc.fail {
				rt.SetItemError("c1", failure)
			}
			if tc.flag {
				e.g.RequestReinspect("p1")
			}
			rt.ResetCalls()

			events := e.relist()

			if got := rt.ItemCalls("c1") > 0; got != tc.wantInspected {
				t.Errorf("inspected = %v, want %v", got, tc.wantInspected)
			}
			if got := e.g.reinspect.take("p1"); got != tc.wantFlagAfter {
				t.Errorf("flag after relist = %v, want %v", got, tc.wantFlagAfter)
			}
			assertEvents(t, events, tc.wantEvents...)
			status, err := e.cache.Get("p1")
			switch {
			case tc.deleted:
				if _, ok := e.cache.GetEntry("p1"); ok {
					t.Error("deleted pod still cached")
				}
			case tc.fail:
				if !errors.Is(err, failure) || status.UID != "p1" {
					t.Errorf("cached (%v, %v), want the failure", status, err)
				}
			case tc.listed:
				if err != nil || status.FindContainerByID("c1") == nil {
					t.Errorf("cached (%v, %v), want the status", status, err)
				}
			}
		})
	}
}

func TestRelistWithReinspection(t *testing.T) {
	infra := ctr("infra", running)
	e := newEnv(t, fakeruntime.New(pod("p1", infra)))
	assertEvents(t, e.relist(), startedEv("p1", "infra"))
	good, _ := e.cache.Get("p1")

	// A transient container in an unknown state, and the pod cannot be
	// inspected: the error is cached, nothing is delivered.
	e.rt.SetPods(pod("p1", infra, ctr("transient", unknown)))
	e.rt.SetItemError("transient", errors.New("cannot inspect"))
	assertEvents(t, e.relist())
	if _, err := e.cache.Get("p1"); err == nil {
		t.Fatal("inspection error not cached")
	}

	// The transient container is gone: the pod is inspected again and its
	// record is back where it was. Kubelets before v1.36 delivered nothing
	// here; a re-inspection without container events now yields PodSync,
	// which tells the consumer the cached error is gone.
	e.rt.SetPods(pod("p1", infra))
	e.rt.ResetCalls()
	assertEvents(t, e.relist(), podSyncEv("p1"))
	if e.rt.ItemCalls("infra") == 0 {
		t.Error("pod not inspected again")
	}
	status, err := e.cache.Get("p1")
	if err != nil || !slices.EqualFunc(status.Containers, good.Containers, func(a, b *runtimeapi.ContainerStatus) bool {
		return a.GetId() == b.GetId() && a.GetState() == b.GetState()
	}) {
		t.Errorf("cache holds (%v, %v), want the good status again", status, err)
	}
}

func TestRelistIPChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		ips  []string
	}{
		{"single stack", []string{"192.168.1.5"}},
		{"dual stack", []string{"192.168.1.5", "2001:db8::5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakeruntime.Pod{UID: "p1", Name: "web", Namespace: "ns", IPs: tc.ips,
				Sandboxes:  []fakeruntime.Sandbox{sbx("s1", ready)},
				Containers: []fakeruntime.Container{ctr("c1", running)},
			}
			e := newEnv(t, fakeruntime.New(p))
			assertEvents(t, e.relist(), startedEv("p1", "c1"), startedEv("p1", "s1"))
			if status, _ := e.cache.Get("p1"); !slices.Equal(status.IPs, tc.ips) {
				t.Fatalf("IPs = %v, want %v", status.IPs, tc.ips)
			}

			// The pod finished and its network is torn down: no IPs.
			p.Sandboxes[0].State = notReady
			p.Containers[0].State = exited
			e.rt.SetPods(p)
			assertEvents(t, e.relist(), diedEv("p1", "c1"), diedEv("p1", "s1"))
			status, _ := e.cache.Get("p1")
			if !slices.Equal(status.IPs, tc.ips) {
				t.Errorf("IPs after teardown = %v, want the last known %v", status.IPs, tc.ips)
			}
		})
	}
}

func TestReadySandboxWithoutIPsClearsThem(t *testing.T) {
	p := fakeruntime.Pod{UID: "p1", Name: "web", Namespace: "ns", IPs: []string{"10.0.0.1"},
		Sandboxes:  []fakeruntime.Sandbox{sbx("s1", ready)},
		Containers: []fakeruntime.Container{ctr("c1", running)},
	}
	e := newEnv(t, fakeruntime.New(p))
	e.relist()
	// A ready sandbox that reports no IP is believed.
	p.IPs = nil
	p.Containers[0].State = exited
	e.rt.SetPods(p)
	e.relist()
	if status, _ := e.cache.Get("p1"); len(status.IPs) != 0 {
		t.Errorf("IPs = %v, want none", status.IPs)
	}
}

func TestRunningPodAndContainerCount(t *testing.T) {
	e := newEnv(t, fakeruntime.New(
		fakeruntime.Pod{UID: "1234", Name: "a", Namespace: "ns",
			Sandboxes:  []fakeruntime.Sandbox{sbx("s1", ready), sbx("s2", ready)},
			Containers: []fakeruntime.Container{ctr("c1", running), ctr("c2", unknown), ctr("c3", unknown)},
		},
		fakeruntime.Pod{UID: "4567", Name: "b", Namespace: "ns",
			Sandboxes:  []fakeruntime.Sandbox{sbx("s3", ready)},
			Containers: []fakeruntime.Container{ctr("c4", exited)},
		},
		fakeruntime.Pod{UID: "7890", Name: "c", Namespace: "ns",
			Sandboxes: []fakeruntime.Sandbox{sbx("s4", notReady)},
		},
	))
	e.relist()
	want := map[string]float64{"created": 0, "running": 1, "exited": 1, "unknown": 2}
	for state, n := range want {
		if got := testutil.ToFloat64(e.g.metrics.RunningContainers.WithLabelValues(state)); got != n {
			t.Errorf("kubelet_running_containers{container_state=%q} = %v, want %v", state, got, n)
		}
	}
	if got := testutil.ToFloat64(e.g.metrics.RunningPods); got != 2 {
		t.Errorf("kubelet_running_pods = %v, want 2", got)
	}

	// A state that drops to zero reads zero, not its stale value.
	e.rt.SetPods()
	e.relist()
	for state := range want {
		if got := testutil.ToFloat64(e.g.metrics.RunningContainers.WithLabelValues(state)); got != 0 {
			t.Errorf("after removal kubelet_running_containers{container_state=%q} = %v, want 0", state, got)
		}
	}
}

func TestRelistFailureChangesNothing(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("p1", ctr("c1", running))))
	e.relist()
	before, _ := e.cache.GetEntry("p1")
	global := e.cache.GlobalTime()

	e.rt.SetPods(pod("p1", ctr("c1", exited)))
	e.rt.InjectError(runtime.OpListContainers, errors.New("runtime down"))
	e.clock.Step(time.Second)
	if err := e.g.Relist(t.Context()); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Fatalf("Relist error = %v, want the list error", err)
	}
	if got := drain(e.ch); len(got) != 0 {
		t.Errorf("events after a failed relist: %v", got)
	}
	if after, _ := e.cache.GetEntry("p1"); after.Modified != before.Modified || !e.cache.GlobalTime().Equal(global) {
		t.Error("a failed relist changed the cache")
	}
	// The change is found by the next relist that succeeds.
	assertEvents(t, e.relist(), diedEv("p1", "c1"))
}

func TestCacheGlobalTimeAfterEveryPod(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("p1", ctr("c1", running)), pod("p2", ctr("c2", running))))
	e.relist()
	ts := e.clock.Now()
	if got := e.cache.GlobalTime(); !got.Equal(ts) {
		t.Errorf("global time = %v, want the relist's start %v", got, ts)
	}
	for _, uid := range []string{"p1", "p2"} {
		if entry, _ := e.cache.GetEntry(uid); !entry.Modified.Equal(ts) {
			t.Errorf("%s modified %v, want %v", uid, entry.Modified, ts)
		}
	}
}

func TestEventCarriesPodAndContainerNames(t *testing.T) {
	e := newEnv(t, fakeruntime.New(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "shop",
		Sandboxes:  []fakeruntime.Sandbox{sbx("s1", ready)},
		Containers: []fakeruntime.Container{{ID: "c1", Name: "nginx", State: running, Image: "nginx:1.27", Attempt: 1}},
	}))
	events := e.relist()
	attempt := uint32(1)
	want := []Event{
		{Type: ContainerStarted, PodUID: "u1", PodName: "web", PodNamespace: "shop", ContainerID: "c1", ContainerName: "nginx", Observed: e.clock.Now(),
			Image: "nginx:1.27", Attempt: &attempt},
		{Type: ContainerStarted, PodUID: "u1", PodName: "web", PodNamespace: "shop", ContainerID: "s1", Sandbox: true, Observed: e.clock.Now()},
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events:\n got  %+v\n want %+v", events, want)
	}
}

func TestUnlabelledContainerFollowsItsSandbox(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "ns",
		Sandboxes: []fakeruntime.Sandbox{sbx("s1", ready)}})
	snap := fakeruntime.NewSnapshot(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "ns",
		Sandboxes: []fakeruntime.Sandbox{sbx("s1", ready)}})
	bare := &runtimeapi.Container{Id: "c1", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: running}
	snap.AddRaw(nil, []*runtimeapi.Container{bare}, nil, map[string]*runtimeapi.ContainerStatus{"c1": {Id: "c1", Metadata: bare.Metadata, State: running}})
	rt.Load(snap)
	e := newEnv(t, rt)
	assertEvents(t, e.relist(), startedEv("u1", "c1"), startedEv("u1", "s1"))
	if status, _ := e.cache.Get("u1"); status.FindContainer("app") == nil {
		t.Error("unlabelled container missing from its pod's status")
	}
}

func TestNotFoundDuringInspectionIsARace(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("p1", ctr("c1", running), ctr("c2", running))))
	// c2 is listed, then removed before its status is asked for.
	e.rt.SetItemError("c2", status.Error(codes.NotFound, "container c2 not found"))
	assertEvents(t, e.relist(), startedEv("p1", "c1"), startedEv("p1", "c2"))
	st, err := e.cache.Get("p1")
	if err != nil {
		t.Fatalf("NotFound counted as an inspection failure: %v", err)
	}
	if st.FindContainerByID("c1") == nil || st.FindContainerByID("c2") != nil {
		t.Errorf("status holds %v, want c1 only", st.Containers)
	}
}
