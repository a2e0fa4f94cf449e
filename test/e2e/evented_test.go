// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// evented returns a watcher driven by the runtime's event stream, global
// relists an hour apart, once the stream holds. On a runtime without one
// (CRI-O with pod events off) it is the generator in auto mode once it
// found there is none: relisting every second, as it must.
func evented(t *testing.T, in *runtimetest.Instance) *watcher {
	t.Helper()
	if !in.Spec.HasEvents() {
		w := watch(t, in, pleg.Options{Mode: pleg.ModeAuto, RelistPeriod: time.Second})
		wait(t, "the generator to find there is no stream", func() bool { return w.gen.Status().NoStream })
		return w
	}
	w := watch(t, in, pleg.Options{Mode: pleg.ModeEvented, RelistPeriod: time.Second,
		EventedRelistPeriod: time.Hour, EventedRelistThreshold: 2 * time.Hour})
	wait(t, "the event stream to drive", func() bool { return w.gen.Status().Evented })
	return w
}

// checkMode checks that an evented watcher is still in the mode evented
// gave it, and healthy.
func checkMode(t *testing.T, in *runtimetest.Instance, w *watcher) {
	t.Helper()
	st := w.gen.Status()
	if in.Spec.HasEvents() != st.Evented || in.Spec.HasEvents() == st.NoStream {
		t.Errorf("on %s the evented generator is in %v", in.Spec, st)
	}
	if ok, err := w.gen.Healthy(); !ok {
		t.Errorf("unhealthy: %v", err)
	}
}

// TestEventedMatchesGeneric runs a scenario under two generators at once,
// one relisting every 100 ms, one driven by the runtime's event stream
// (relisting every second where there is none): every container's events
// are the same.
func TestEventedMatchesGeneric(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		gen := watch(t, in, pleg.Options{Mode: pleg.ModeGeneric})
		ev := evented(t, in)
		both := func(what string, uid, id string, want ...pleg.EventType) {
			t.Helper()
			gen.waitEvents(t, uid, id, want...)
			ev.waitEvents(t, uid, id, want...)
		}

		pod := newPod("evented")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		app, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		job, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "job", Args: []string{"crashloop", "1", "1s"}})
		must(t, err)
		both("sandbox", pod.UID, sb, S)
		both("app", pod.UID, app, S)
		both("job", pod.UID, job, S, D)

		again, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "job", Args: sleeping, Attempt: 1})
		must(t, err)
		both("the new attempt", pod.UID, again, S)
		must(t, in.RemoveContainer(ctx(t), job))
		both("the old attempt", pod.UID, job, S, D, R)

		must(t, in.StopPod(ctx(t), sb))
		// CRI-O sends no event when a pod is removed (neither for the
		// sandbox nor for the containers removed with it): the removal
		// watch finds it, the global relist being an hour away.
		must(t, in.RemovePod(ctx(t), sb))
		for _, id := range []string{sb, app, again} {
			both("the pod's end", pod.UID, id, S, D, R)
		}
		for _, id := range []string{sb, app, job, again} {
			if g, e := gen.types(pod.UID, id), ev.types(pod.UID, id); !slices.Equal(g, e) {
				t.Errorf("%.12s: generic %v, evented %v", id, g, e)
			}
		}
		checkMode(t, in, ev)
	})
}

// TestShortLivedContainer: a container created, exited and removed between
// two relists is missed by relisting, as the kubelet documents, and
// reported by the event stream. Without a stream, relisting every second
// may see some of it: what it reports is then a true part of the story.
func TestShortLivedContainer(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		ev := evented(t, in)
		// A generic generator that relists only when told to.
		gen := watch(t, in, pleg.Options{Mode: pleg.ModeGeneric, RelistPeriod: time.Hour, RelistThreshold: 2 * time.Hour})

		pod := newPod("flash")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		must(t, gen.gen.Relist(ctx(t)))
		gen.waitEvents(t, pod.UID, sb, S)

		flash, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "flash", Args: []string{"exit", "0"}})
		must(t, err)
		wait(t, "the container to exit", func() bool {
			st, err := in.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: flash})
			return err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
		})
		must(t, in.RemoveContainer(ctx(t), flash))
		must(t, gen.gen.Relist(ctx(t)))

		if got := gen.types(pod.UID, flash); len(got) != 0 {
			t.Errorf("relisting saw %v of a container that lived between two relists", got)
		}
		if in.Spec.HasEvents() {
			ev.waitEvents(t, pod.UID, flash, S, D, R)
		} else {
			// Two relists later the container is gone for good.
			must(t, ev.gen.Relist(ctx(t)))
			must(t, ev.gen.Relist(ctx(t)))
			if got := ev.types(pod.UID, flash); len(got) != 0 && !slices.Equal(got, []pleg.EventType{S, D, R}) && !slices.Equal(got, []pleg.EventType{D, R}) {
				t.Errorf("relisting every second reported %v of the short-lived container, want nothing, or its end", got)
			}
		}
		checkMode(t, in, ev)
	})
}

// TestEventedRuntimeRestart: the runtime killed and restarted under an
// evented generator: the stream reconnects and drives again, and what
// happened meanwhile is reported.
func TestEventedRuntimeRestart(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		ev := evented(t, in)
		pod := newPod("reconnect")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		long, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "long", Args: sleeping})
		must(t, err)
		short, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "short", Args: []string{"exit", "7", "3s"}})
		must(t, err)
		ev.waitEvents(t, pod.UID, long, S)
		ev.waitEvents(t, pod.UID, short, S)

		must(t, in.Kill())
		if in.Spec.HasEvents() {
			wait(t, "the stream to go down", func() bool { return !ev.gen.Status().StreamConnected })
		}
		time.Sleep(4 * time.Second) // short exits meanwhile
		must(t, in.Restart(ctx(t)))

		if in.Spec.HasEvents() {
			wait(t, "the stream to drive again", func() bool { return ev.gen.Status().Evented })
		}
		ev.waitEvents(t, pod.UID, short, S, D)
		wait(t, "the cache to agree with the runtime", func() bool {
			status, err := ev.cache.Get(pod.UID)
			if err != nil {
				return false
			}
			for _, id := range []string{long, short} {
				truth, err := in.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
				if err != nil || status.FindContainerByID(id).GetState() != truth.GetStatus().GetState() {
					return false
				}
			}
			return true
		})
		if got := ev.types(pod.UID, long); !slices.Equal(got, []pleg.EventType{S}) {
			t.Errorf("the running container's events across the restart: %v", got)
		}
		// The backlog containerd replays at reconnect reported nothing more.
		time.Sleep(time.Second)
		if got := ev.types(pod.UID, short); !slices.Equal(got, []pleg.EventType{S, D}) {
			t.Errorf("short: %v", got)
		}
		wait(t, "healthy", func() bool { ok, _ := ev.gen.Healthy(); return ok })
		checkMode(t, in, ev)
	})
}

// TestFallbackOnContainerd16: Debian's containerd 1.6 has CRI but no event
// stream. In auto mode the generator finds that out, relists every period,
// and reports what happens all the same.
func TestFallbackOnContainerd16(t *testing.T) {
	in := runtimes.Get(t, runtimetest.Spec{Kind: runtimetest.Containerd, Version: runtimetest.DebianContainerd16})
	w := watch(t, in, pleg.Options{Mode: pleg.ModeAuto})
	wait(t, "the generator to find there is no stream", func() bool { return w.gen.Status().NoStream })
	if s := w.gen.Status(); s.Evented || s.RelistPeriod != 100*time.Millisecond {
		t.Errorf("status %+v: want relisting every period", s)
	}
	pod := newPod("legacy")
	sb, err := in.RunPod(ctx(t), pod)
	must(t, err)
	c, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "job", Args: []string{"exit", "2", "1s"}})
	must(t, err)
	w.waitEvents(t, pod.UID, sb, S)
	w.waitEvents(t, pod.UID, c, S, D)
	if ok, err := w.gen.Healthy(); !ok {
		t.Errorf("unhealthy without a stream in auto mode: %v", err)
	}
	t.Logf("containerd %s: %s", in.Version, w.gen.Status())
}
