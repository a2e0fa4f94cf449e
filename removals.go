// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

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
// its sandbox nor for the containers removed with it. Relisting the node
// every second to find such removals would cost what evented mode saves.
// But only what has exited can be removed (the kubelet stops a pod before
// it removes it), so the removal watch lists only the exited sandboxes,
// or containers, of the kinds of removal the stream leaves out, once a
// second, and only while it knows of some: the items it lists, and those
// the generator reported exited since. One it knew that a list no longer
// holds was removed, and its pod is relisted, which reports the removal.
// A node whose pods all run costs nothing; one with exited items, one
// list a second per kind, of those items alone.
//
// Which kinds of removal a stream tells, the stream supervisor learns
// (stream.go): from what the runtime's adapter knows of it, then from the
// DELETED events that come and the removals relists find untold.

// removalPollPeriod is how often the removal watch lists exited items.
const removalPollPeriod = time.Second

// removalKind is a kind of removal a stream may leave out.
type removalKind uint8

const (
	// containerRemovals: RemoveContainer removed a container.
	containerRemovals removalKind = iota
	// podRemovals: RemovePodSandbox removed a sandbox, and the containers
	// left in it.
	podRemovals
	numRemovalKinds
)

func (k removalKind) String() string {
	if k == podRemovals {
		return "pod"
	}
	return "container"
}

// removalMisses is how many of the watch's lists may miss an item it knew
// before it is forgotten: each miss asks for a relist of its pod, which
// reports the removal and so forgets the item; a relist that fails is
// asked for again.
const removalMisses = 3

// candidate is an exited item the removal watch knows of.
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
	watched func(removalKind) bool
	// found asks for a relist of pod uid, one of whose items is gone.
	found func(uid string)

	mu sync.Mutex
	// items are the exited items known, by ID, of each kind watched.
	items [numRemovalKinds]map[string]*candidate
	// seeded tells that a list of the kind's exited items has been read
	// since it has been watched.
	seeded [numRemovalKinds]bool
}

func newRemovalWatch(rt runtime.Runtime, clk clock.WithDelayedExecution, log *slog.Logger,
	watched func(removalKind) bool, found func(uid string)) *removalWatch {
	w := &removalWatch{rt: rt, clock: clk, log: log, watched: watched, found: found}
	for k := range w.items {
		w.items[k] = make(map[string]*candidate)
	}
	return w
}

// run polls until ctx ends.
func (w *removalWatch) run(ctx context.Context) {
	timer := w.clock.NewTimer(removalPollPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		timer.Reset(removalPollPeriod)
		for k := range numRemovalKinds {
			w.poll(ctx, k)
		}
	}
}

// poll lists the exited items of kind k, if it is watched and anything is
// to be found, and asks for relists of the pods of the items gone.
func (w *removalWatch) poll(ctx context.Context, k removalKind) {
	if !w.due(k) {
		return
	}
	start := w.clock.Now()
	listed, err := w.listExited(ctx, k)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Debug("Listing exited items for removals the event stream does not tell", "kind", k, "err", err)
		}
		return // the next tick tries again
	}
	for _, uid := range w.compare(k, listed, start) {
		w.found(uid)
	}
}

// due reports whether kind k is to be listed now, and forgets what it
// knew of a kind no longer watched.
func (w *removalWatch) due(k removalKind) bool {
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

// listExited lists the exited items of kind k: their IDs and pods.
func (w *removalWatch) listExited(ctx context.Context, k removalKind) (map[string]string, error) {
	out := make(map[string]string)
	if k == podRemovals {
		sandboxes, err := w.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}})
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

// compare takes a list of kind k's exited items that began at start: what
// it holds is known from now on, and the pods of the known items it
// misses are returned, once each.
func (w *removalWatch) compare(k removalKind, listed map[string]string, start time.Time) []string {
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

// settled learns from what the generator reported of pod uid: items that
// exited may be removed unseen, items removed are done with.
func (w *removalWatch) settled(uid string, ts []transition, now time.Time) {
	var watched [numRemovalKinds]bool
	for k := range numRemovalKinds {
		watched[k] = w.watched(k)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range ts {
		k := containerRemovals
		if t.sandbox {
			k = podRemovals
		}
		switch t.new {
		case stateExited:
			if watched[k] {
				if _, ok := w.items[k][t.id]; !ok {
					w.items[k][t.id] = &candidate{uid: uid, since: now}
				}
			}
		case stateNonExistent:
			delete(w.items[k], t.id)
		}
	}
}

// size returns how many exited items the watch knows of each kind, for
// tests of its bounds.
func (w *removalWatch) size() (containers, pods int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.items[containerRemovals]), len(w.items[podRemovals])
}
