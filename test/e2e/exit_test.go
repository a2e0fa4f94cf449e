// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"testing"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// event returns the first event of type typ of pod uid about id.
func (w *watcher) event(uid, id string, typ pleg.EventType) (pleg.Event, bool) {
	for _, ev := range w.of(uid) {
		if ev.ContainerID == id && ev.Type == typ {
			return ev, true
		}
	}
	return pleg.Event{}, false
}

// TestDiedSaysWhy: a ContainerDied says how its container exited, as the
// runtime reports it, under a relisting generator and an evented one: a
// container exiting 3 carries exit code 3 and the reason Error, one the
// OOM killer killed OOMKilled; every container event carries the image
// and the attempt; a sandbox's Died carries no exit.
func TestDiedSaysWhy(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		gen := watch(t, in, pleg.Options{Mode: pleg.ModeGeneric})
		ev := evented(t, in)
		watchers := map[string]*watcher{"generic": gen, "evented": ev}

		pod := newPod("exits")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		failing, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "failing",
			Args: []string{"exit", "3", "1s"}, Attempt: 2})
		must(t, err)
		hog, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "hog", Args: []string{"oom", "1s"},
			MemoryLimit: 32 << 20})
		must(t, err)

		for name, w := range watchers {
			w.waitEvents(t, pod.UID, failing, S, D)
			started, _ := w.event(pod.UID, failing, S)
			died, _ := w.event(pod.UID, failing, D)
			for _, e := range []pleg.Event{started, died} {
				// The image as the runtime reports it: CRI-O the reference
				// the container was created from, containerd the image's
				// first tag, and the test image is also tagged the
				// sandbox image.
				if (e.Image != runtimetest.TestImage && e.Image != runtimetest.SandboxImage) || e.Attempt == nil || *e.Attempt != 2 {
					t.Errorf("%s: %s of the failing container: image %q, attempt %v; want %s (or its other tag) and attempt 2",
						name, e.Type, e.Image, deref(e.Attempt), runtimetest.TestImage)
				}
			}
			if started.ExitCode != nil || started.Reason != "" {
				t.Errorf("%s: its Started carries an exit: %d %q", name, *started.ExitCode, started.Reason)
			}
			t.Logf("%s: %s says image %q, attempt %v, exit code %v, reason %q, message %q, finished at %v",
				name, died.Type, died.Image, deref(died.Attempt), deref(died.ExitCode), died.Reason, died.Message, died.FinishedAt)
			if died.ExitCode == nil || *died.ExitCode != 3 || died.Reason != "Error" || died.FinishedAt.IsZero() {
				t.Errorf("%s: its Died: exit code %v, reason %q, finished at %v; want 3, Error and a time",
					name, deref(died.ExitCode), died.Reason, died.FinishedAt)
			}

			// Killed in milliseconds: a relist may never see it run.
			wait(t, name+": the hog's Died", func() bool { _, ok := w.event(pod.UID, hog, D); return ok })
			oom, _ := w.event(pod.UID, hog, D)
			t.Logf("%s: the hog's Died says exit code %v, reason %q, message %q", name, deref(oom.ExitCode), oom.Reason, oom.Message)
			if oom.ExitCode == nil || *oom.ExitCode != 137 || oom.Reason != "OOMKilled" {
				t.Errorf("%s: the Died of the container over its memory limit: exit code %v, reason %q (%q); "+
					"want 137, OOMKilled", name, deref(oom.ExitCode), oom.Reason, oom.Message)
			}
		}

		must(t, in.StopPod(ctx(t), sb))
		for name, w := range watchers {
			w.waitEvents(t, pod.UID, sb, S, D)
			died, _ := w.event(pod.UID, sb, D)
			if died.ExitCode != nil || died.Reason != "" || died.Image != "" || died.Attempt != nil {
				t.Errorf("%s: the sandbox's Died carries %+v; want no exit, image or attempt", name, died)
			}
		}
	})
}

func deref[T any](p *T) any {
	if p == nil {
		return "none"
	}
	return *p
}
