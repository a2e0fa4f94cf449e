// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"context"
	"log/slog"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/runtime"
)

// Removals the event stream does not tell.
//
// CRI-O sends no event when RemovePodSandbox removes a pod: neither for
// its sandbox nor for the containers removed with it, nor, for a pod
// removed while it runs (crictl rmp -f), for the containers it stops on
// the way. Relisting the node every second to find such removals would
// cost what evented mode saves. But RemoveContainer removes only what has
// exited (the kubelet stops a container before it removes it), so the
// removal watch lists once a second only the exited containers, if the
// stream leaves out their removals, and the sandboxes, of every state, if
// it leaves out pods': one list of sandboxes, the cheapest list there is,
// and no inspection. It lists a kind only while it knows of some items:
// those it listed, and those the generator reported since. One it knew
// that a list no longer holds was removed, and its pod is relisted, which
// reports the removal. On CRI-O, a node with pods costs one
// ListPodSandbox a second; ListContainers only while exited containers
// are left, and only on a runtime that does not tell their removals.
//
// Which kinds of removal a stream tells, the stream supervisor learns
// (supervisor.go): from what the runtime's adapter knows of it, then from the
// DELETED events that come and the removals relists find untold.

// RemovalPollPeriod is how often the removal watch lists.
const RemovalPollPeriod = time.Second

// RemovalKind is a kind of removal a stream may leave out.
type RemovalKind uint8

const (
	// ContainerRemovals are containers RemoveContainer removed.
	ContainerRemovals RemovalKind = iota
	// PodRemovals are sandboxes RemovePodSandbox removed, and the containers
	// left in it.
	PodRemovals
	// NumRemovalKinds is how many kinds there are, to size arrays by kind.
	NumRemovalKinds
)

// String names the kind, as Status and the logs show it.
func (k RemovalKind) String() string {
	if k == PodRemovals {
		return "pod"
	}
	return "container"
}

// removalMisses is how many of the watch's lists may miss an item it knew
// before it is forgotten: each miss asks for a relist of its pod, which
// reports the removal and so forgets the item; a relist that fails is
// asked for again.
const removalMisses = 3

// candidate is an item the removal watch knows of: an exited container,
// or a sandbox.
type candidate struct {
	uid string
	// since is when the watch learned of it; a list that began before
	// says nothing of it.
	since  time.Time
	misses int
}

// removalWatch finds removals the stream does not tell. It runs beside
// the relist loop and touches no relist state: it asks for relists.
type removalWatch struct {
	rt    runtime.Runtime
	clock clock.WithDelayedExecution
	log   *slog.Logger
	// watched tells whether to look for removals of a kind now.
	watched func(RemovalKind) bool
	// found asks for a relist of pod uid, one of whose items is gone.
	found func(uid string)

	mu sync.Mutex
	// items are the items known that may be removed unseen, by ID, of
	// each kind watched.
	items [NumRemovalKinds]map[string]*candidate
	// seeded tells that a list of the kind's items has been read since
	// it has been watched.
	seeded [NumRemovalKinds]bool
}

func newRemovalWatch(rt runtime.Runtime, clk clock.WithDelayedExecution, log *slog.Logger,
	watched func(RemovalKind) bool, found func(uid string)) *removalWatch {
	w := &removalWatch{rt: rt, clock: clk, log: log, watched: watched, found: found}
	for k := range w.items {
		w.items[k] = make(map[string]*candidate)
	}
	return w
}

// run polls until ctx ends.
func (w *removalWatch) run(ctx context.Context) {
	timer := w.clock.NewTimer(RemovalPollPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		timer.Reset(RemovalPollPeriod)
		for k := range NumRemovalKinds {
			w.poll(ctx, k)
		}
	}
}

// poll lists the items of kind k, if it is watched and anything is to be
// found, and asks for relists of the pods of the items gone.
func (w *removalWatch) poll(ctx context.Context, k RemovalKind) {
	if !w.due(k) {
		return
	}
	start := w.clock.Now()
	listed, err := w.list(ctx, k)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Debug("Listing items for removals the event stream does not tell", "kind", k, "err", err)
		}
		return // the next tick tries again
	}
	for _, uid := range w.compare(k, listed, start) {
		w.found(uid)
	}
}

// due reports whether kind k is to be listed now, and forgets what it
// knew of a kind no longer watched.
func (w *removalWatch) due(k RemovalKind) bool {
	watched := w.watched(k)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !watched {
		clear(w.items[k])
		w.seeded[k] = false
		return false
	}
	return !w.seeded[k] || len(w.items[k]) > 0
}

// list lists the items of kind k that may be removed unseen, with their
// pods: every sandbox, or the exited containers.
func (w *removalWatch) list(ctx context.Context, k RemovalKind) (map[string]string, error) {
	out := make(map[string]string)
	if k == PodRemovals {
		sandboxes, err := w.rt.ListPodSandbox(ctx, nil)
		for _, sb := range sandboxes {
			if uid := sb.GetMetadata().GetUid(); uid != "" && sb.GetId() != "" {
				out[sb.GetId()] = uid
			}
		}
		return out, err
	}
	containers, err := w.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}})
	for _, c := range containers {
		if uid := c.GetLabels()[runtime.PodUIDLabel]; uid != "" && c.GetId() != "" {
			out[c.GetId()] = uid
		}
	}
	return out, err
}

// compare takes a list of kind k's items that began at start: what
// it holds is known from now on, and the pods of the known items it
// misses are returned, once each.
func (w *removalWatch) compare(k RemovalKind, listed map[string]string, start time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gone []string
	seen := make(map[string]bool)
	for id, c := range w.items[k] {
		if _, ok := listed[id]; ok || c.since.After(start) {
			continue
		}
		if c.misses++; c.misses > removalMisses {
			delete(w.items[k], id)
			continue
		}
		if !seen[c.uid] {
			seen[c.uid] = true
			gone = append(gone, c.uid)
		}
	}
	for id, uid := range listed {
		if _, ok := w.items[k][id]; !ok {
			w.items[k][id] = &candidate{uid: uid, since: start}
		}
	}
	w.seeded[k] = true
	return gone
}

// settled learns from what the generator reported of pod uid: containers
// that exited and sandboxes that run or exited may be removed unseen,
// items removed are done with.
func (w *removalWatch) settled(uid string, items []Item, now time.Time) {
	var watched [NumRemovalKinds]bool
	for k := range NumRemovalKinds {
		watched[k] = w.watched(k)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		k := ContainerRemovals
		if it.Sandbox {
			k = PodRemovals
		}
		switch {
		case it.Now == ItemExited || (it.Sandbox && it.Now == ItemRunning):
			if watched[k] {
				if _, ok := w.items[k][it.ID]; !ok {
					w.items[k][it.ID] = &candidate{uid: uid, since: now}
				}
			}
		case it.Now == ItemRemoved:
			delete(w.items[k], it.ID)
		}
	}
}

// size returns how many items the watch knows of each kind, for
// tests of its bounds.
func (w *removalWatch) size() (containers, pods int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.items[ContainerRemovals]), len(w.items[PodRemovals])
}
