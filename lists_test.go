// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// staleListRuntime answers a relist's lists out of order once armed: its
// sandboxes are listed only after its containers were, and meanwhile runs.
type staleListRuntime struct {
	*fakeruntime.Runtime
	mu        sync.Mutex
	meanwhile func()
	listed    chan struct{} // closed once the armed container list is over
}

// arm makes the next container list run meanwhile once it has its
// answer, and the sandbox list made beside it wait for that.
func (r *staleListRuntime) arm(meanwhile func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.meanwhile, r.listed = meanwhile, make(chan struct{})
}

func (r *staleListRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	cs, err := r.Runtime.ListContainers(ctx, f)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.meanwhile != nil {
		r.meanwhile()
		r.meanwhile = nil
		close(r.listed)
	}
	return cs, err
}

func (r *staleListRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	listed := r.listed
	r.mu.Unlock()
	if listed != nil {
		// A generator that lists the two one after the other, sandboxes
		// first, never makes the container list this waits for: an hour
		// of the bubble's time lets it go on.
		select {
		case <-listed:
		case <-time.After(time.Hour):
		}
	}
	return r.Runtime.ListPodSandbox(ctx, f)
}

// TestContainerListOlderThanTheSandboxList: the two lists are made
// together, so the container list may be the older one. A pod whose
// container and sandbox were removed between the two then shows a
// container without its sandbox; the containers are listed again, and the
// relist reports the whole pod removed, rather than its sandbox now and
// its container a relist later.
func TestContainerListOlderThanTheSandboxList(t *testing.T) {
	for _, global := range []bool{true, false} {
		name := "pod relist"
		if global {
			name = "global relist"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				web := fakeruntime.Pod{UID: "web", Name: "web", Namespace: "ns",
					Sandboxes:  []fakeruntime.Sandbox{sbx("s1", notReady)},
					Containers: []fakeruntime.Container{ctr("c1", exited)}}
				db := fakeruntime.Pod{UID: "db", Name: "db", Namespace: "ns",
					Sandboxes: []fakeruntime.Sandbox{sbx("s2", ready)}}
				rt := &staleListRuntime{Runtime: fakeruntime.New(web, db)}
				g := newLoopGenerator(t, rt, podcache.New())
				sub := g.Subscribe()
				defer sub.Close()
				if global {
					if err := g.Relist(t.Context()); err != nil {
						t.Fatal(err)
					}
				} else {
					g.Start()
					defer g.Stop()
				}
				nextEvents(t, sub, 3)

				rt.arm(func() { rt.SetPods(db) })
				rt.ResetCalls()
				if global {
					if err := g.Relist(t.Context()); err != nil {
						t.Fatal(err)
					}
				} else {
					g.RequestRelist("web")
				}
				got := nextEvents(t, sub, 2)
				assertEvents(t, got, removedEv("web", "c1"), removedEv("web", "s1"))
				if got[0].ContainerID != "c1" {
					t.Errorf("events %v: the sandbox removed before its container", reduce(got))
				}
				if n := rt.Calls(runtime.OpListContainers); n != 2 {
					t.Errorf("%d container lists, want 2: the first, and one after the sandboxes", n)
				}
			})
		})
	}
}

// nextEvents returns the next n events of sub, or fails.
func nextEvents(t *testing.T, sub *Subscription, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out []Event
	for range n {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", reduce(out), err)
		}
		out = append(out, ev)
	}
	return out
}
