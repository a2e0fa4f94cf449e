// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"errors"
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

// Evented tests run in synctest bubbles over the fake runtime's event
// stream. The safety-net relist is an hour apart, so that what happens
// after the first relist is the stream's doing.

const (
	evCreated = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	evStarted = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	evStopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	evDeleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
)

type eventedEnv struct {
	t   *testing.T
	rt  *fakeruntime.Runtime
	g   *Generator
	sub *Subscription
	// got holds what emit collected.
	got []ev
}

func newEventedEnv(t *testing.T, mode Mode, pods ...fakeruntime.Pod) *eventedEnv {
	t.Helper()
	return newEventedEnvWith(t, func(o *Options) { o.Mode = mode }, pods...)
}

// hintOnly takes events as hints alone, ignoring their payloads.
func hintOnly(o *Options) { o.HintOnly = true }

// eventPaths are the two ways a generator takes events: their payloads
// applied at once, and hints for relists alone.
var eventPaths = []struct {
	name string
	opt  func(*Options)
}{
	{"payloads", func(*Options) {}},
	{"hints", hintOnly},
}

func newEventedEnvWith(t *testing.T, opt func(*Options), pods ...fakeruntime.Pod) *eventedEnv {
	t.Helper()
	rt := fakeruntime.New(pods...)
	// Its stream says it tells every removal, as containerd's.
	rt.SetRemovalEvents(runtime.Supported, runtime.Supported)
	return newEventedEnvOn(t, rt, opt)
}

// newEventedEnvOn is newEventedEnvWith over rt, whose events it enables.
func newEventedEnvOn(t *testing.T, rt *fakeruntime.Runtime, opt func(*Options)) *eventedEnv {
	t.Helper()
	rt.EnableEvents(true)
	o := Options{
		Mode:                ModeAuto,
		RelistPeriod:        time.Second,
		EventedRelistPeriod: time.Hour,
		// Above the hour, as the evented threshold must exceed its period.
		EventedRelistThreshold: 2 * time.Hour,
		Cache:                  podcache.New(),
		Clock:                  clock.RealClock{},
		Logger:                 slog.New(slog.DiscardHandler),
	}
	opt(&o)
	g, err := New(rt, o)
	if err != nil {
		t.Fatal(err)
	}
	e := &eventedEnv{t: t, rt: rt, g: g, sub: g.Subscribe()}
	g.Start()
	t.Cleanup(func() {
		g.Stop()
		e.sub.Close()
	})
	return e
}

// settle lets the stream come up, hold, and the generator relist once.
func (e *eventedEnv) settle() {
	time.Sleep(stream.Hold + 2*time.Second)
	synctest.Wait()
	e.drain()
}

// emit sends an event and collects what the generator delivers for it, as
// a subscriber that reads at once does.
func (e *eventedEnv) emit(pod, id string, typ runtimeapi.ContainerEventType) {
	e.rt.Emit(pod, id, typ, time.Time{})
	synctest.Wait()
	e.got = append(e.got, e.drain()...)
}

// wait lets d pass and collects what comes meanwhile.
func (e *eventedEnv) wait(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
	e.got = append(e.got, e.drain()...)
}

func (e *eventedEnv) drain() []ev {
	var out []ev
	for {
		x, ok := e.sub.TryNext()
		if !ok {
			return out
		}
		out = append(out, ev{x.PodUID, x.Type, x.ContainerID})
	}
}

func webPod(containers ...fakeruntime.Container) fakeruntime.Pod {
	return fakeruntime.Pod{UID: "web", Name: "web", Namespace: "shop",
		Sandboxes: []fakeruntime.Sandbox{{ID: "sb", State: ready}}, Containers: containers}
}

func TestEventsDrivePerPodRelists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
		e.settle()
		if s := e.g.Status(); !s.Evented || s.RelistPeriod != time.Hour || s.RelistThreshold != 2*time.Hour {
			t.Fatalf("status %+v: want evented with the slow period and threshold", s)
		}
		if got := testutil.ToFloat64(e.g.metrics.Mode.WithLabelValues("evented")); got != 1 {
			t.Errorf("pleg_mode{mode=evented} = %v", got)
		}

		e.rt.ResetCalls()
		_ = e.rt.SetContainerState("c1", exited, 1)
		e.rt.Emit("web", "c1", evStopped, time.Time{})
		synctest.Wait()
		if got := e.drain(); !slices.Equal(got, []ev{diedEv("web", "c1")}) {
			t.Errorf("events %v, want Died(c1)", got)
		}
		// One relist of the pod, filtered: a list of sandboxes and one of
		// containers, then its inspection.
		if n := e.rt.Calls(runtime.OpListPodSandbox); n != 1 {
			t.Errorf("%d sandbox lists, want the pod's one", n)
		}
		if st, _ := e.g.Cache().Get("web"); st.FindContainerByID("c1").GetExitCode() != 1 {
			t.Error("the cache does not hold the exit")
		}
	})
}

func TestHintsOfOnePodCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnvWith(t, hintOnly, webPod(ctr("c1", running), ctr("c2", running)))
		e.settle()
		before := testutil.ToFloat64(e.g.metrics.PodRelists)
		// The loop is kept busy with another pod while five hints come.
		e.rt.SetLatency(runtime.OpListPodSandbox, time.Second)
		e.g.RequestRelist("other")
		synctest.Wait()
		_ = e.rt.SetContainerState("c1", exited, 0)
		_ = e.rt.SetContainerState("c2", exited, 0)
		for _, id := range []string{"c1", "c2", "c1", "c2", "sb"} {
			e.rt.Emit("web", id, evStopped, time.Time{})
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := testutil.ToFloat64(e.g.metrics.PodRelists) - before; got != 2 {
			t.Errorf("%v per-pod relists, want 2: other's, then one for all of web's hints", got)
		}
		if got := testutil.ToFloat64(e.g.metrics.HintsCoalesced); got != 4 {
			t.Errorf("%v hints coalesced, want 4", got)
		}
		assertEvents(t, toEvents(e.drain()), diedEv("web", "c1"), diedEv("web", "c2"))
	})
}

// toEvents turns reduced events back into events for assertEvents.
func toEvents(evs []ev) []Event {
	var out []Event
	for _, e := range evs {
		out = append(out, Event{PodUID: e.pod, Type: e.typ, ContainerID: e.data})
	}
	return out
}

// TestShortLivedContainer: a container created, started, exited and
// removed before any relist could see it is still reported, in the order
// it lived: at once from the payloads, or from its hints once the relist
// finds it gone.
func TestShortLivedContainer(t *testing.T) {
	for _, path := range eventPaths {
		t.Run(path.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEventedEnvWith(t, path.opt, webPod(ctr("c1", running)))
				e.settle()
				// A relist of web lists for a second, its containers
				// listed first: the container lives and goes meanwhile.
				e.rt.SetLatency(runtime.OpListPodSandbox, time.Second)
				e.g.RequestRelist("web")
				synctest.Wait()
				p := webPod()
				e.rt.AddContainer(p, fakeruntime.Container{ID: "job", Name: "job", State: running})
				e.emit("web", "job", evCreated)
				e.emit("web", "job", evStarted)
				_ = e.rt.SetContainerState("job", exited, 0)
				e.emit("web", "job", evStopped)
				e.rt.Remove("job")
				e.emit("web", "job", evDeleted)
				e.wait(2 * time.Second)
				want := []ev{startedEv("web", "job"), diedEv("web", "job"), removedEv("web", "job")}
				if !slices.Equal(e.got, want) {
					t.Errorf("events %v, want %v", e.got, want)
				}
				// Only the hints know of containers no relist saw.
				wantShortLived := 0.0
				if path.name == "hints" {
					wantShortLived = 3
				}
				if n := testutil.ToFloat64(e.g.metrics.ShortLivedEvents); n != wantShortLived {
					t.Errorf("pleg_evented_short_lived_events_total = %v, want %v", n, wantShortLived)
				}
				// A relist later, nothing more about it.
				e.g.requestGlobalRelist()
				synctest.Wait()
				if got := e.drain(); len(got) != 0 {
					t.Errorf("again: %v", got)
				}
			})
		})
	}
}

// TestShortLivedPod: a whole pod created and removed between relists.
func TestShortLivedPod(t *testing.T) {
	for _, path := range eventPaths {
		t.Run(path.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEventedEnvWith(t, path.opt)
				e.settle()
				e.rt.SetLatency(runtime.OpListPodSandbox, time.Second)
				job := fakeruntime.Pod{UID: "job", Name: "job", Namespace: "batch",
					Sandboxes: []fakeruntime.Sandbox{{ID: "jsb", State: ready}}, Containers: []fakeruntime.Container{{ID: "jc", Name: "run", State: running}}}
				e.rt.AddPod(job)
				e.emit("job", "jsb", evCreated)
				e.emit("job", "jsb", evStarted)
				e.emit("job", "jc", evStarted)
				_ = e.rt.SetContainerState("jc", exited, 0)
				e.emit("job", "jc", evStopped)
				// Once the pod is gone, its events carry no sandbox status:
				// they are attributed to it by their IDs.
				e.rt.RemovePod("job")
				e.emit("job", "jc", evDeleted)
				e.emit("job", "jsb", evStopped)
				e.emit("job", "jsb", evDeleted)
				e.wait(2 * time.Second)
				for _, id := range []string{"jc", "jsb"} {
					var types []EventType
					for _, x := range e.got {
						if x.data == id {
							types = append(types, x.typ)
						}
					}
					if want := []EventType{ContainerStarted, ContainerDied, ContainerRemoved}; !slices.Equal(types, want) {
						t.Errorf("%s: %v, want %v (all: %v)", id, types, want, e.got)
					}
				}
				if _, ok := e.g.Cache().(*podcache.Cache).GetEntry("job"); ok {
					t.Error("the gone pod is still cached")
				}
			})
		})
	}
}

// TestLateDeletedIsNotReportedTwice: the relist saw the container go, then
// the stream's DELETED arrives.
func TestLateDeletedIsNotReportedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running), ctr("c2", running)))
		e.settle()
		_ = e.rt.SetContainerState("c2", exited, 0)
		e.rt.Remove("c2")
		e.g.requestGlobalRelist()
		synctest.Wait()
		assertEvents(t, toEvents(e.drain()), diedEv("web", "c2"), removedEv("web", "c2"))
		e.rt.Emit("web", "c2", evStopped, time.Time{})
		e.rt.Emit("web", "c2", evDeleted, time.Time{})
		synctest.Wait()
		if got := e.drain(); len(got) != 0 {
			t.Errorf("the late hints reported %v again", got)
		}
	})
}

// TestBacklogReplayDoesNoHarm: containerd replays minutes of old events to
// its first subscriber. They ask for relists, and report nothing.
func TestBacklogReplayDoesNoHarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
		e.settle()
		old := time.Now().Add(-4 * time.Minute)
		// A container that lived and went four minutes ago, and the stream's
		// whole story of c1.
		e.rt.Emit("web", "ghost", evStarted, old)
		e.rt.Emit("web", "ghost", evDeleted, old)
		e.rt.Emit("web", "c1", evStarted, old)
		synctest.Wait()
		if got := e.drain(); len(got) != 0 {
			t.Errorf("replayed events reported %v", got)
		}
		if n := testutil.ToFloat64(e.g.metrics.Hints.WithLabelValues("replayed")); n != 3 {
			t.Errorf("%v replayed hints counted, want 3", n)
		}
	})
}

func TestStreamDropsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running)))
		e.settle()

		// The stream breaks and the runtime refuses new ones for a while.
		e.rt.InjectError(runtime.OpGetContainerEvents, errors.New("unavailable"))
		e.rt.InjectError(runtime.OpGetContainerEvents, errors.New("unavailable"))
		_ = e.rt.SetContainerState("c1", exited, 1) // lost with the stream
		e.rt.EndStreams(errors.New("transport is closing"))
		synctest.Wait()
		if s := e.g.Status(); s.Evented || s.StreamConnected || s.RelistPeriod != time.Second {
			t.Errorf("status after the drop %+v: want relisting every second", s)
		}
		// The relist that follows the drop finds what the stream lost.
		assertEvents(t, toEvents(e.drain()), diedEv("web", "c1"))

		// It reconnects (two failures, then success) and drives again.
		time.Sleep(time.Minute)
		synctest.Wait()
		if s := e.g.Status(); !s.Evented {
			t.Errorf("status after recovery %+v: want evented", s)
		}
		if n := testutil.ToFloat64(e.g.metrics.EventedConnectionErrors); n != 3 {
			t.Errorf("connection errors %v, want 3 (the drop, two refusals)", n)
		}
		if n := testutil.ToFloat64(e.g.metrics.EventedConnectionSuccess); n != 2 {
			t.Errorf("connections %v, want 2", n)
		}
		if ok, err := e.g.Healthy(); !ok {
			t.Errorf("unhealthy: %v", err)
		}
	})
}

func TestNoStream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(*fakeruntime.Runtime)
	}{
		{"unimplemented", func(rt *fakeruntime.Runtime) { rt.EnableEvents(false) }},
		{"closed at once, as CRI-O with pod events off", func(rt *fakeruntime.Runtime) { rt.CloseEventsAtOnce(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := fakeruntime.New(webPod(ctr("c1", running)))
				rt.EnableEvents(true)
				tc.prepare(rt)
				g, err := New(rt, Options{RelistPeriod: time.Second, Clock: clock.RealClock{}, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				g.Start()
				defer g.Stop()
				time.Sleep(time.Minute)
				synctest.Wait()
				s := g.Status()
				if s.Evented || !s.NoStream || s.RelistPeriod != time.Second {
					t.Errorf("status %+v: want relisting every second, no stream", s)
				}
				if !strings.Contains(s.String(), "no container event stream") {
					t.Errorf("status line %q", s.String())
				}
				// Rarely retried: once at start, then every five minutes.
				if n := rt.Calls(runtime.OpGetContainerEvents); n != 1 {
					t.Errorf("%d attempts in a minute, want 1", n)
				}
				// The runtime gains a stream: the next retry finds it.
				rt.EnableEvents(true)
				rt.CloseEventsAtOnce(false)
				time.Sleep(5*time.Minute + stream.Hold + time.Second)
				synctest.Wait()
				if !g.Status().Evented {
					t.Errorf("status %+v: want evented once the runtime has a stream", g.Status())
				}
			})
		})
	}
}

// TestForcedEventedMode: without a stream, --mode evented keeps retrying at
// its usual pace and turns unhealthy after the threshold.
func TestForcedEventedMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := fakeruntime.New(webPod(ctr("c1", running)))
		g, err := New(rt, Options{Mode: ModeEvented, RelistPeriod: time.Second, RelistThreshold: time.Minute,
			Clock: clock.RealClock{}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		g.Start()
		defer g.Stop()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if ok, err := g.Healthy(); !ok {
			t.Errorf("unhealthy before the threshold: %v", err)
		}
		if n := rt.Calls(runtime.OpGetContainerEvents); n < 5 {
			t.Errorf("%d attempts in 30 s, want the backoff's pace, not every five minutes", n)
		}
		time.Sleep(45 * time.Second)
		synctest.Wait()
		ok, err := g.Healthy()
		if ok || !strings.HasPrefix(err.Error(), "the container event stream has been down for ") {
			t.Errorf("Healthy() = %v, %v; want unhealthy for the stream", ok, err)
		}
	})
}

func TestGenericModeOpensNoStream(t *testing.T) {
	rt := fakeruntime.New()
	rt.EnableEvents(true)
	e := newEnv(t, rt, func(o *Options) { o.Mode = ModeGeneric })
	e.relist()
	if rt.Calls(runtime.OpGetContainerEvents) != 0 || e.g.stream != nil {
		t.Error("generic mode opened the event stream")
	}
}

// podsToRemove are three pods of a sandbox and a container each.
func podsToRemove() []fakeruntime.Pod {
	var pods []fakeruntime.Pod
	for _, uid := range []string{"a", "b", "c"} {
		pods = append(pods, fakeruntime.Pod{UID: uid, Name: uid, Namespace: "ns",
			Sandboxes:  []fakeruntime.Sandbox{{ID: "sb-" + uid, State: ready}},
			Containers: []fakeruntime.Container{{ID: "c-" + uid, Name: "app", SandboxID: "sb-" + uid, State: running}}})
	}
	return pods
}

// startRemovals starts a generator over podsToRemove, on a runtime whose
// stream says of pod removals what known says ("" for nothing: a runtime
// not known), and lets the stream drive.
func startRemovals(t *testing.T, known runtime.Availability) *eventedEnv {
	t.Helper()
	rt := fakeruntime.New(podsToRemove()...)
	if known != "" {
		rt.SetRemovalEvents(runtime.Supported, known)
	}
	e := newEventedEnvOn(t, rt, func(*Options) {})
	e.settle()
	return e
}

// stopPod stops pod uid of podsToRemove, as the kubelet does before it
// removes it, with the events every runtime sends.
func (e *eventedEnv) stopPod(uid string) {
	_ = e.rt.SetContainerState("c-"+uid, exited, 137)
	e.emit(uid, "c-"+uid, evStopped)
	_ = e.rt.SetSandboxState("sb-"+uid, notReady)
	e.emit(uid, "sb-"+uid, evStopped)
}

// removePod removes pod uid of podsToRemove, with the events of a runtime
// that tells pod removals if tells.
func (e *eventedEnv) removePod(uid string, tells bool) {
	e.rt.RemovePod(uid)
	if tells {
		e.emit(uid, "c-"+uid, evDeleted)
		e.emit(uid, "sb-"+uid, evDeleted)
	}
}

// removedPod is what removing a stopped pod of podsToRemove reports.
func removedPod(uid string) []ev {
	return []ev{removedEv(uid, "c-"+uid), removedEv(uid, "sb-"+uid)}
}

// TestRemovalsTheStreamDoesNotTell: CRI-O sends no event when a pod is
// removed, neither for its sandbox nor for its containers. Where the
// runtime is known not to tell them, or not known and not seen to, or
// found by relists not to, the removal watch lists the sandboxes every
// second and finds them, while the global relist keeps its slow
// period: a pod's removal is reported within two seconds, not a
// safety-net period late. A stream known or seen to tell them costs no
// list.
func TestRemovalsTheStreamDoesNotTell(t *testing.T) {
	for _, tc := range []struct {
		name string
		// known is what the stream says it tells of pod removals; "" for
		// nothing, of a runtime not known.
		known runtime.Availability
		// tells: the runtime sends DELETED events.
		tells bool
		// watched: the removal watch lists sandboxes before any removal.
		watched bool
		// untold are the kinds of removal taken not to be told after.
		untold []string
	}{
		{"containerd: known to tell, tells", runtime.Supported, true, false, nil},
		{"CRI-O: known not to tell", runtime.Unsupported, false, true, []string{"pod"}},
		{"a runtime not known, that does not tell", "", false, true, []string{"container", "pod"}},
		{"a runtime not known, that tells", "", true, true, nil},
		{"a runtime known to tell, that does not", runtime.Supported, false, false, []string{"pod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := startRemovals(t, tc.known)
				// Past the first relist: the records were observed while
				// the stream was up.
				e.g.requestGlobalRelist()
				e.wait(time.Second)
				for _, uid := range []string{"a", "b", "c"} {
					e.stopPod(uid)
				}
				e.got = nil

				// An idle node of stopped pods: the watch lists the
				// sandboxes every second, if it watches.
				e.rt.ResetCalls()
				e.wait(time.Minute)
				lists := e.rt.Calls(runtime.OpListPodSandbox)
				if tc.watched && (lists < 55 || lists > 61) || !tc.watched && lists != 0 {
					t.Errorf("%d sandbox lists in a minute of stopped pods; watched %v", lists, tc.watched)
				}

				for _, uid := range []string{"a", "b", "c"} {
					e.removePod(uid, tc.tells)
					e.wait(2 * time.Second)
					if !slices.Equal(e.got, removedPod(uid)) && !tc.tells {
						if tc.known == runtime.Supported {
							// Relists must find untold removals before the
							// stream is taken not to tell them.
							e.g.requestGlobalRelist()
							e.wait(time.Second)
						}
					}
					if !slices.Equal(e.got, removedPod(uid)) {
						t.Errorf("%s removed: %v, want %v", uid, e.got, removedPod(uid))
					}
					e.got = nil
				}
				// A DELETED may come a while after a relist found its
				// removal: only then is it untold.
				e.wait(stream.UntoldGrace)
				s := e.g.Status()
				if !s.Evented || s.RelistPeriod != time.Hour {
					t.Errorf("evented %v, relist period %v; want evented, an hour", s.Evented, s.RelistPeriod)
				}
				if !slices.Equal(s.UntoldRemovals, tc.untold) {
					t.Errorf("untold removals %q, want %q", s.UntoldRemovals, tc.untold)
				}
				if told := !strings.Contains(s.String(), "it does not tell"); told != (tc.untold == nil) {
					t.Errorf("status line %q", s)
				}
				// No pod is left: the watch lists nothing more.
				e.rt.ResetCalls()
				e.wait(time.Minute)
				if n := e.rt.Calls(runtime.OpListPodSandbox); n != 0 {
					t.Errorf("%d sandbox lists in a minute without sandboxes", n)
				}
				if pods := e.g.stream.Sizes().WatchedPods; pods != 0 {
					t.Errorf("the watch still knows %d sandboxes", pods)
				}
			})
		})
	}
}

// TestRunningPodRemovedUntold: RemovePodSandbox also removes a pod that
// runs (crictl rmp -f), and CRI-O then sends nothing at all, not even the
// STOPPED of the containers it kills. The removal watch lists every
// sandbox, not only the exited ones, and finds it within two seconds, not
// a safety-net period late; on a runtime that tells pod removals, it
// lists nothing.
func TestRunningPodRemovedUntold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		known runtime.Availability
	}{{"CRI-O: known not to tell", runtime.Unsupported}, {"containerd: known to tell", runtime.Supported}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := startRemovals(t, tc.known)
				e.rt.ResetCalls()
				e.wait(time.Minute)
				lists := e.rt.Calls(runtime.OpListPodSandbox)
				if watched := tc.known == runtime.Unsupported; watched && (lists < 55 || lists > 61) || !watched && lists != 0 {
					t.Errorf("%d sandbox lists in a minute of running pods", lists)
				}
				e.got = nil
				e.removePod("a", tc.known == runtime.Supported)
				e.wait(2 * time.Second)
				want := []ev{diedEv("a", "c-a"), removedEv("a", "c-a"), diedEv("a", "sb-a"), removedEv("a", "sb-a")}
				if !slices.Equal(e.got, want) {
					t.Errorf("a running pod removed: %v, want %v", e.got, want)
				}
				if s := e.g.Status(); !s.Evented || s.RelistPeriod != time.Hour {
					t.Errorf("evented %v, relist period %v; want evented, an hour", s.Evented, s.RelistPeriod)
				}
			})
		})
	}
}

// TestContainersLateDeletedKeepsTheWatch: on CRI-O, a container removed
// on its own (told) just before its pod (untold) may be found removed
// with the pod before its DELETED comes. That DELETED says nothing of pod
// removals: the removal watch goes on listing sandboxes, and the next pod
// removed is still reported within two seconds, not an hour late. (Seen
// in TestEventedOverSimulator on the simulator's CRI-O mode: a sandbox's
// removal never reported.)
func TestContainersLateDeletedKeepsTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startRemovals(t, runtime.Unsupported)
		// Past the first relist: the records were observed while the
		// stream was up.
		e.g.requestGlobalRelist()
		e.wait(time.Second)
		for _, uid := range []string{"a", "b"} {
			e.stopPod(uid)
		}
		e.got = nil

		e.removePod("a", false)
		e.wait(2 * time.Second)
		if !slices.Equal(e.got, removedPod("a")) {
			t.Fatalf("a removed: %v, want %v", e.got, removedPod("a"))
		}
		e.got = nil
		// c-a's DELETED, late: it was removed on its own just before.
		e.emit("a", "c-a", evDeleted)
		e.wait(stream.UntoldGrace)
		if len(e.got) != 0 {
			t.Errorf("a late DELETED reported %v", e.got)
		}
		if s := e.g.Status(); !slices.Equal(s.UntoldRemovals, []string{"pod"}) {
			t.Errorf("untold removals %q after a container's late DELETED, want pods'", s.UntoldRemovals)
		}
		e.got = nil
		e.removePod("b", false)
		e.wait(2 * time.Second)
		if !slices.Equal(e.got, removedPod("b")) {
			t.Errorf("b removed after a's container's late DELETED: %v, want %v", e.got, removedPod("b"))
		}
	})
}

// TestRemovedIsNeverListedBack: containerd sends a sandbox's DELETED
// just before its ListPodSandbox stops showing it, and a relist that lists
// in between sees the sandbox again. It must not take it for a new item
// and tell it Died, and later Removed, a second time: an ID, once removed,
// never comes back. That holds from the moment the stream connects, before
// it drives. (Both seen in TestKilledAtRandomLosesNothing on containerd
// 2.4, as a pod was removed; the second a second after a restart.)
func TestRemovedIsNeverListedBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready func(e *eventedEnv)
	}{
		{"the stream drives", (*eventedEnv).settle},
		{"the stream just connected", func(*eventedEnv) { time.Sleep(time.Second); synctest.Wait() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEventedEnv(t, ModeAuto, webPod(ctr("c1", running), ctr("c2", running)))
				tc.ready(e)
				if e.g.evented() == (tc.name != "the stream drives") {
					t.Fatalf("evented() = %v", e.g.evented())
				}
				e.drain()
				_ = e.rt.SetContainerState("c2", exited, 0)
				e.emit("web", "c2", evStopped)
				e.rt.Remove("c2")
				e.emit("web", "c2", evDeleted)
				// The lists show c2 again, exited, as a list answered a
				// moment before the removal would.
				e.rt.AddContainer(webPod(), ctr("c2", exited))
				e.g.requestGlobalRelist()
				synctest.Wait()
				e.rt.Remove("c2")
				e.wait(2 * time.Minute)
				if want := []ev{diedEv("web", "c2"), removedEv("web", "c2")}; !slices.Equal(e.got, want) {
					t.Errorf("events %v, want %v", e.got, want)
				}
			})
		})
	}
}
