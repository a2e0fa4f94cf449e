// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// rawEvents records a runtime's own event stream.
type rawEvents struct {
	mu  sync.Mutex
	evs []*runtimeapi.ContainerEventResponse
}

func recordEvents(t *testing.T, in *runtimetest.Instance) *rawEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := in.Runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rawEvents{}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.evs = append(r.evs, ev)
			r.mu.Unlock()
		}
	}()
	return r
}

// of returns the types of the events for id, in order.
func (r *rawEvents) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.evs {
		if ev.GetContainerId() == id {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(ev.GetContainerEventType().String(), "CONTAINER_"), "_EVENT"))
		}
	}
	return out
}

// runtimeEvents is what each runtime sends for a pod's sandbox and for a
// container in it that runs until the pod is stopped and removed, as
// measured (see TestRuntimeEvents).
func runtimeEvents(spec runtimetest.Spec) (sandbox, container []string) {
	switch spec.Kind {
	case runtimetest.CRIO:
		// No CREATED for a sandbox, no DELETED for a pod removed with
		// what is in it.
		return []string{"STARTED", "STOPPED"}, []string{"CREATED", "STARTED", "STOPPED"}
	default:
		return []string{"CREATED", "STARTED", "STOPPED", "DELETED"}, []string{"CREATED", "STARTED", "STOPPED", "DELETED"}
	}
}

// TestRuntimeEvents records what the runtime's own event stream sends
// through a pod's life, and checks it against what each runtime is known
// to send (runtimeEvents): the differences the generator's evented mode
// lives with. Every event but a DELETED carries the pod: its sandbox's
// status and its containers'.
//
// containerd 1.7 does not broadcast: its subscribers take turns at one
// channel, and the handler of a stream its client closed still takes one
// more event before it finds out, and loses it. Events of a stream
// closed by an earlier test can go that way, so on 1.7 the test asks only
// that what arrives is in order and nothing else.
func TestRuntimeEvents(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		if !in.Spec.HasEvents() {
			t.Skipf("%s has no event stream (TestEventedMatchesGeneric checks the generator relists alone)", in.Spec)
		}
		r := recordEvents(t, in)
		pod := newPod("events")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		a, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "a", Args: sleeping})
		must(t, err)
		b, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "b", Args: []string{"exit", "3", "1s"}})
		must(t, err)
		wait(t, "b's exit", func() bool { return slices.Contains(r.of(b), "STOPPED") })
		must(t, in.RemoveContainer(ctx(t), b))
		must(t, in.StopPod(ctx(t), sb))
		must(t, in.RemovePod(ctx(t), sb))
		// The stream is in order: once a later pod's first event is in,
		// every event of this one is.
		later := newPod("events-later")
		lsb, err := in.RunPod(ctx(t), later)
		must(t, err)
		wait(t, "the later pod's sandbox event", func() bool { return len(r.of(lsb)) > 0 })

		wantSandbox, wantContainer := runtimeEvents(in.Spec)
		for _, c := range []struct {
			what string
			id   string
			want []string
		}{
			{"the sandbox", sb, wantSandbox},
			{"a container stopped and removed with its pod", a, wantContainer},
			{"a container that exited, removed on its own", b, []string{"CREATED", "STARTED", "STOPPED", "DELETED"}},
		} {
			got := r.of(c.id)
			if lossy := strings.HasPrefix(in.Spec.Version, "v1."); lossy && !subsequence(got, c.want) || !lossy && !slices.Equal(got, c.want) {
				t.Errorf("%s sent %v for %s, want %v", in.Spec, got, c.what, c.want)
			} else if len(got) < len(c.want) {
				t.Logf("%s sent %v for %s, of %v: the rest went to another subscriber", in.Spec, got, c.what, c.want)
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, ev := range r.evs {
			// containerd sends a DELETED without the pod when the sandbox
			// is gone already.
			if ev.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT && ev.GetPodSandboxStatus().GetMetadata().GetUid() == "" {
				t.Errorf("%s: event %v %.12s came without its pod's sandbox status", in.Spec, ev.GetContainerEventType(), ev.GetContainerId())
			}
		}
	})
}

// subsequence reports whether got is want with some elements left out.
func subsequence(got, want []string) bool {
	for _, g := range got {
		i := slices.Index(want, g)
		if i < 0 {
			return false
		}
		want = want[i+1:]
	}
	return true
}
