// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func withStore(s Store) envOption { return func(o *Options) { o.Store = s } }

// A generator created again on the store of one that ran before carries on
// from what that one reported: what changed meanwhile is reported once,
// marked AfterRestart, and nothing else.
func TestRestartCarriesOn(t *testing.T) {
	before := []fakeruntime.Pod{
		{UID: "web", Name: "web", Namespace: "ns",
			Sandboxes:  []fakeruntime.Sandbox{sbx("sb-web", ready)},
			Containers: []fakeruntime.Container{ctr("kept", running), ctr("killed", running), ctr("done", exited)}},
		pod("gone", ctr("g1", running), ctr("g2", exited)),
		pod("still", ctr("s1", running)),
	}
	for _, tc := range []struct {
		name          string
		before, after []fakeruntime.Pod
		want          []ev
	}{{
		name:  "nothing changed",
		after: before,
	}, {
		name: "a container killed, one removed, one started, a pod gone, a pod new",
		after: []fakeruntime.Pod{
			{UID: "web", Name: "web", Namespace: "ns",
				Sandboxes:  []fakeruntime.Sandbox{sbx("sb-web", ready)},
				Containers: []fakeruntime.Container{ctr("kept", running), ctr("killed", exited), ctr("new", running)}},
			pod("still", ctr("s1", running)),
			pod("born", ctr("b1", running)),
		},
		want: []ev{
			startedEv("born", "b1"),
			diedEv("gone", "g1"), removedEv("gone", "g1"), removedEv("gone", "g2"),
			removedEv("web", "done"), diedEv("web", "killed"), startedEv("web", "new"),
		},
	}, {
		name: "a container restarted under a new ID",
		after: []fakeruntime.Pod{
			{UID: "web", Name: "web", Namespace: "ns",
				Sandboxes:  []fakeruntime.Sandbox{sbx("sb-web", ready)},
				Containers: []fakeruntime.Container{ctr("kept", running), ctr("killed", exited), ctr("killed-2", running), ctr("done", exited)}},
			pod("gone", ctr("g1", running), ctr("g2", exited)),
			pod("still", ctr("s1", running)),
		},
		want: []ev{diedEv("web", "killed"), startedEv("web", "killed-2")},
	}, {
		// The kubelet's first relist would report it Died alone; it ran.
		name: "a container that ran and exited meanwhile",
		after: []fakeruntime.Pod{
			{UID: "web", Name: "web", Namespace: "ns",
				Sandboxes:  []fakeruntime.Sandbox{sbx("sb-web", ready)},
				Containers: []fakeruntime.Container{ctr("kept", running), ctr("killed", running), ctr("done", exited), ctr("quick", exited)}},
			pod("gone", ctr("g1", running), ctr("g2", exited)),
			pod("still", ctr("s1", running)),
		},
		want: []ev{startedEv("web", "quick"), diedEv("web", "quick")},
	}, {
		name:   "a created container that ran and exited meanwhile",
		before: []fakeruntime.Pod{pod("web", ctr("new", created))},
		after: []fakeruntime.Pod{
			pod("web", ctr("new", exited)),
		},
		want: []ev{startedEv("web", "new"), diedEv("web", "new")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			store := &MemoryStore{}
			if tc.before == nil {
				tc.before = before
			}
			rt := fakeruntime.New(tc.before...)
			first := newEnv(t, rt, withStore(store))
			first.relist()
			if r, _ := store.Restore(); len(r.Pods) == 0 {
				t.Fatal("the first run reported nothing")
			}

			rt.SetPods(tc.after...)
			second := newEnv(t, rt, withStore(store))
			got := second.relist()
			assertEvents(t, got, tc.want...)
			for _, e := range got {
				if !e.AfterRestart {
					t.Errorf("%v: not marked AfterRestart", e)
				}
			}
			assertEvents(t, second.relist())

			// The cache knows every pod listed, changed or not.
			for _, p := range tc.after {
				if s, err := second.cache.Get(p.UID); err != nil || s == nil || len(s.Containers) != len(p.Containers) {
					t.Errorf("cache of pod %s: %+v, %v; want its %d containers", p.UID, s, err, len(p.Containers))
				}
			}
		})
	}
}

// Events found after a restart carry the container's own times.
func TestRestartEventsCarryContainerTimes(t *testing.T) {
	store := &MemoryStore{}
	rt := fakeruntime.New(pod("p", ctr("c", running)))
	newEnv(t, rt, withStore(store)).relist()

	if err := rt.SetContainerState("c", exited, 3); err != nil {
		t.Fatal(err)
	}
	got := newEnv(t, rt, withStore(store)).relist()
	assertEvents(t, got, diedEv("p", "c"))
	if e := got[0]; e.StartedAt.IsZero() || e.FinishedAt.IsZero() || !e.FinishedAt.After(e.StartedAt) {
		t.Errorf("Died after a restart: started %v, finished %v; want both, finished after started", e.StartedAt, e.FinishedAt)
	}
}

// A pod whose inspection fails at the first relist after a restart reports
// what changed meanwhile once it can be inspected, still marked.
func TestRestartRetriesFailedInspection(t *testing.T) {
	store := &MemoryStore{}
	rt := fakeruntime.New(pod("p", ctr("c", running)))
	newEnv(t, rt, withStore(store)).relist()

	if err := rt.SetContainerState("c", exited, 1); err != nil {
		t.Fatal(err)
	}
	rt.SetItemError("c", errors.New("status failed"))
	e := newEnv(t, rt, withStore(store))
	assertEvents(t, e.relist())
	rt.SetItemError("c", nil)
	got := e.relist()
	assertEvents(t, got, diedEv("p", "c"))
	if len(got) == 1 && !got[0].AfterRestart {
		t.Error("the Died found at the second relist is not marked AfterRestart")
	}
}

// Events of a generator that started on an empty store, or after its first
// relist, are not marked.
func TestLiveEventsAreNotMarked(t *testing.T) {
	store := &MemoryStore{}
	rt := fakeruntime.New(pod("p", ctr("c", running)))
	e := newEnv(t, rt, withStore(store))
	for _, ev := range e.relist() {
		if ev.AfterRestart {
			t.Errorf("%+v: marked AfterRestart on a first run", ev)
		}
	}
	e = newEnv(t, rt, withStore(store))
	assertEvents(t, e.relist())
	rt.AddPod(pod("q", ctr("d", running)))
	got := e.relist()
	assertEvents(t, got, startedEv("q", "d"))
	if slices.ContainsFunc(got, func(e Event) bool { return e.AfterRestart }) {
		t.Errorf("%+v: marked AfterRestart after the first relist", got)
	}
}

// The store gets every change before subscribers see it, with the pod's
// report: a pod gone leaves no report behind.
func TestStoreKeepsWhatWasReported(t *testing.T) {
	store := &recordingStore{}
	rt := fakeruntime.New(pod("p", ctr("c", running)), pod("q", ctr("d", exited)))
	e := newEnv(t, rt, withStore(store))
	sub := e.g.Subscribe()
	defer sub.Close()
	e.relist()
	if n := store.events; n != 2 {
		t.Errorf("store got %d events, want 2", n)
	}
	rt.RemovePod("q")
	e.relist()
	restored, _ := store.Restore()
	reports := restored.Pods
	if len(reports) != 1 || reports[0].UID != "p" || len(reports[0].Items) != 1 || reports[0].Items[0].State != ItemRunning {
		t.Errorf("store holds %+v, want pod p with c running", reports)
	}
	var delivered int
	for {
		if _, ok := sub.TryNext(); !ok {
			break
		}
		delivered++
	}
	if delivered != store.events {
		t.Errorf("delivered %d events, store kept %d", delivered, store.events)
	}
}

// A store that cannot keep a change does not keep subscribers from it.
func TestStoreFailureStillDelivers(t *testing.T) {
	store := &recordingStore{fail: errors.New("disk full")}
	e := newEnv(t, fakeruntime.New(pod("p", ctr("c", running))), withStore(store))
	assertEvents(t, e.relist(), startedEv("p", "c"))
}

// A store whose reports do not make sense fails New with a clear error.
func TestRestoreRefusesBadReports(t *testing.T) {
	for _, reports := range [][]PodReport{
		{{UID: "", Items: []ItemReport{{ID: "c", State: ItemRunning}}}},
		{{UID: "p", Items: []ItemReport{{ID: "c", State: "dancing"}}}},
	} {
		store := &MemoryStore{pods: map[string]PodReport{"x": reports[0]}}
		if _, err := New(fakeruntime.New(), Options{Store: store}); err == nil {
			t.Errorf("New over %+v: no error", reports)
		}
	}
}

// recordingStore is a MemoryStore that counts events and can fail.
type recordingStore struct {
	MemoryStore
	events int
	fail   error
}

func (s *recordingStore) Commit(events []Event, pods []PodReport) error {
	if s.fail != nil {
		return s.fail
	}
	s.events += len(events)
	return s.MemoryStore.Commit(events, pods)
}

// sinceStore is a MemoryStore that says since when it keeps what was
// reported, and which containers were reported removed, as a journal does.
type sinceStore struct {
	MemoryStore
	since   time.Time
	removed map[string]time.Time
}

func (s *sinceStore) Restore() (Restored, error) {
	r, err := s.MemoryStore.Restore()
	r.Since, r.Removed = s.since, s.removed
	return r, err
}

// The backlog a runtime kept while no generator watched (containerd holds
// five minutes of it for its next subscriber) tells of containers that
// came and went meanwhile: they are reported once, marked AfterRestart.
// Backlog from before the store kept anything, and containers reported
// removed already, report nothing.
func TestMissedBacklogIsReported(t *testing.T) {
	for _, path := range eventPaths {
		t.Run(path.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &sinceStore{since: time.Now().Add(-time.Hour)}
				withTheStore := func(o *Options) { o.Store = store; path.opt(o) }
				first := newEventedEnvWith(t, withTheStore, webPod(ctr("c1", running)))
				first.settle()
				first.g.Stop()
				down := time.Now()
				store.removed = map[string]time.Time{"gone": down.Add(-time.Minute)}
				time.Sleep(time.Minute)

				// The same runtime, watched again: its backlog comes first.
				e := newEventedEnvOn(t, first.rt, withTheStore)
				e.settle()
				at := down.Add(10 * time.Second)
				for _, typ := range []runtimeapi.ContainerEventType{evCreated, evStarted, evStopped, evDeleted} {
					e.rt.Emit("web", "ghost", typ, at)
				}
				e.rt.Emit("web", "c1", evStarted, at)                                 // known and unchanged
				e.rt.Emit("web", "gone", evDeleted, at)                               // reported removed already
				e.rt.Emit("web", "ancient", evDeleted, store.since.Add(-time.Minute)) // before the store
				time.Sleep(2 * time.Second)
				synctest.Wait()
				var got []Event
				for x, ok := e.sub.TryNext(); ok; x, ok = e.sub.TryNext() {
					got = append(got, x)
				}
				assertEvents(t, got, startedEv("web", "ghost"), diedEv("web", "ghost"), removedEv("web", "ghost"))
				for _, x := range got {
					if !x.AfterRestart {
						t.Errorf("%+v: not marked AfterRestart", x)
					}
				}
			})
		})
	}
}

// The backlog may come a moment after the stream connects. The first
// relist of a generator catching up waits for it: the lists no longer show
// a container that started, exited and went meanwhile, and its STARTED,
// had it come after that relist, would tell of a container reported
// removed already. A runtime that keeps no backlog delays that relist by
// stream.BacklogQuiet, and an event sent since the stream connected ends the
// wait at once.
func TestFirstRelistAwaitsTheBacklog(t *testing.T) {
	type burst struct {
		at    time.Duration // after the stream connected
		types []runtimeapi.ContainerEventType
	}
	ranAndWent := []ev{startedEv("web", "c1"), diedEv("web", "c1"), removedEv("web", "c1")}
	for _, tc := range []struct {
		name    string
		backlog []burst
		// live sends an event of now after the backlog.
		live bool
		// late tells that the backlog begins after the first relist's
		// lists.
		late bool
		// relistBy is when the first relist is done, after the stream
		// connected.
		relistBy time.Duration
		want     []ev
	}{{
		name:     "no backlog",
		relistBy: stream.BacklogQuiet,
		// All it knows is that c1 was created and is gone.
		want: []ev{diedEv("web", "c1"), removedEv("web", "c1")},
	}, {
		name: "a backlog in two bursts",
		backlog: []burst{
			{10 * time.Millisecond, []runtimeapi.ContainerEventType{evStarted, evStopped}},
			{200 * time.Millisecond, []runtimeapi.ContainerEventType{evDeleted}},
		},
		relistBy: 200*time.Millisecond + stream.BacklogQuiet,
		want:     ranAndWent,
	}, {
		// A loaded runtime starts sending the backlog only after the
		// quiet: the first relist found c1 gone from created, and the
		// STARTED that comes after it must still be told, in order.
		name:     "a backlog later than the quiet",
		backlog:  []burst{{stream.BacklogQuiet + 100*time.Millisecond, []runtimeapi.ContainerEventType{evStarted, evStopped, evDeleted}}},
		late:     true,
		relistBy: stream.BacklogQuiet,
		want:     ranAndWent,
	}, {
		name:     "a live event after the backlog",
		backlog:  []burst{{10 * time.Millisecond, []runtimeapi.ContainerEventType{evStarted, evStopped, evDeleted}}},
		live:     true,
		relistBy: 10 * time.Millisecond,
		want:     ranAndWent,
	}} {
		for _, path := range eventPaths {
			t.Run(tc.name+"/"+path.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					store := &sinceStore{since: time.Now().Add(-time.Hour)}
					withTheStore := func(o *Options) { o.Store = store; path.opt(o) }
					first := newEventedEnvWith(t, withTheStore, webPod(ctr("c1", created)))
					first.settle()
					first.g.Stop()
					down := time.Now()
					first.rt.Remove("c1") // it started, exited and went meanwhile
					time.Sleep(time.Minute)

					e := newEventedEnvOn(t, first.rt, withTheStore)
					connected := time.Now()
					for _, b := range tc.backlog {
						time.Sleep(b.at - time.Since(connected))
						for _, typ := range b.types {
							e.rt.Emit("web", "c1", typ, down.Add(time.Second))
						}
					}
					if tc.live {
						e.rt.Emit("web", "sb", evStarted, time.Time{})
					}
					synctest.Wait()
					if ok, _ := e.g.Healthy(); ok && len(tc.backlog) > 0 && !tc.live && !tc.late {
						t.Errorf("relisted before the backlog was over")
					}
					time.Sleep(tc.relistBy - time.Since(connected))
					synctest.Wait()
					if ok, err := e.g.Healthy(); !ok {
						t.Errorf("no relist %v after the stream connected: %v", time.Since(connected), err)
					}
					e.wait(time.Minute)
					if !slices.Equal(e.got, tc.want) {
						t.Errorf("events %v, want %v", e.got, tc.want)
					}
				})
			})
		}
	}
}
