// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/stream"
)

// Hints.
//
// An event the generator cannot apply at once (see payload.go) is a hint:
// it asks for a relist of its pod, and the relist alone writes the cache
// and yields the events. What a relist cannot see, the hints remember: a
// container created, exited and removed between two relists is reported
// from its hints, Started, Died and Removed, once a relist finds it gone;
// one that started and exited before its relist yields its Started before
// its Died.

const (
	// hintTTL is how long a hint about a container that no relist found
	// gone waits before it is dropped, and how long the pod of an ID
	// learned from an event is remembered once no record knows the ID.
	hintTTL = time.Minute
	// tombstoneTTL is how long the ID of a removed container is kept, so
	// that a late DELETED does not report it again.
	tombstoneTTL = 10 * time.Minute
)

// hint is what the events said of one container or sandbox.
type hint struct {
	id      string
	name    string
	sandbox bool
	stages  stage
	last    time.Time
	// live tells that an event came while a generator watched; a hint
	// made only of events missed while none did tells what happened
	// before a restart.
	live bool
}

// transitions are the state changes the hinted stages imply, from not
// existing to gone: created is unknown, started running, stopped exited.
func (h *hint) transitions() []transition {
	states := []state{stateNonExistent}
	for _, s := range []struct {
		stage
		state
	}{{stageCreated, stateUnknown}, {stageStarted, stateRunning}, {stageStopped, stateExited}} {
		if h.stages&s.stage != 0 {
			states = append(states, s.state)
		}
	}
	states = append(states, stateNonExistent)
	var out []transition
	for i := 1; i < len(states); i++ {
		if states[i] != states[i-1] {
			out = append(
				out,
				transition{id: h.id, name: h.name, sandbox: h.sandbox, old: states[i-1], new: states[i], afterRestart: !h.live},
			)
		}
	}
	return out
}

// podHints are the hints about one pod, in the order they came.
type podHints struct {
	name, namespace string
	items           []*hint
}

// owner is the pod an ID belongs to, as an event told it.
type owner struct {
	uid     string
	learned time.Time
}

// hintBook holds hints until a relist of their pod consumes them. It is
// bounded by the containers that exist or have just gone, not by events:
// a container's hints fold into one, its owner is forgotten once no record
// knows it, and tombstones expire. It is part of the relist state and
// shares its owner; it does no locking.
type hintBook struct {
	pods map[string]*podHints
	// owners maps sandbox and container IDs to their pod, for events that
	// come without a sandbox status (containerd sends none when the
	// sandbox is already gone).
	owners map[string]owner
	// removed holds the IDs of containers reported removed, and when.
	removed map[string]time.Time
}

func newHintBook() *hintBook {
	return &hintBook{pods: make(map[string]*podHints), owners: make(map[string]owner), removed: make(map[string]time.Time)}
}

// ownerOf returns the pod an earlier event tied a container or sandbox ID
// to, or "".
func (b *hintBook) ownerOf(id string) string { return b.owners[id].uid }

// pending reports whether pod uid has hints waiting for a relist.
func (b *hintBook) pending(uid string) bool { return b.pods[uid] != nil }

// learn remembers the pod of every ID an event names.
func (b *hintBook) learn(ev *runtimeapi.ContainerEventResponse, uid string, now time.Time) {
	if id := ev.GetContainerId(); id != "" {
		b.owners[id] = owner{uid, now}
	}
	if id := ev.GetPodSandboxStatus().GetId(); id != "" {
		b.owners[id] = owner{uid, now}
	}
	for _, c := range ev.GetContainersStatuses() {
		if c.GetId() != "" {
			b.owners[c.GetId()] = owner{uid, now}
		}
	}
}

// origin is when an event was sent, as the hints take it.
type origin uint8

const (
	// sentLive: sent while this generator watched.
	sentLive origin = iota
	// replayed: backlog a runtime kept for its next subscriber, sent
	// before the Store began keeping what was reported: old news.
	replayed
	// missed: backlog sent since the Store began keeping what was
	// reported, while no generator watched: it may tell of a container
	// that came and went meanwhile, which no relist can see.
	missed
)

// note records an event about pod uid as a hint, and reports whether it
// could: an event needs an ID and a pod. A replayed event only teaches the
// pods of the IDs it names; a missed one is a hint like any other, marked
// so. rec, the pod's record if it has one, may know the event's subject as
// a sandbox, for an event that came without the sandbox's ID (containerd's
// and CRI-O's, once the pod is gone).
func (b *hintBook) note(
	ev *runtimeapi.ContainerEventResponse,
	uid string,
	rec *podRecord,
	from origin,
	now time.Time,
) bool {
	id := ev.GetContainerId()
	if uid == "" || id == "" {
		return false
	}
	b.learn(ev, uid, now)
	if from == replayed {
		return true
	}
	sb := ev.GetPodSandboxStatus()
	ph := b.pods[uid]
	if ph == nil {
		ph = &podHints{}
		b.pods[uid] = ph
	}
	if md := sb.GetMetadata(); md != nil && md.GetName() != "" {
		ph.name, ph.namespace = md.GetName(), md.GetNamespace()
	}
	var h *hint
	for _, x := range ph.items {
		if x.id == id {
			h = x
		}
	}
	if h == nil {
		h = &hint{id: id, sandbox: id == sb.GetId() || (rec != nil && rec.knows(id, true))}
		ph.items = append(ph.items, h)
	}
	for _, c := range ev.GetContainersStatuses() {
		if c.GetId() != id {
			continue
		}
		if c.GetMetadata().GetName() != "" {
			h.name = c.GetMetadata().GetName()
		}
		if c.GetStartedAt() > 0 {
			// It ran, whether or not its STARTED came: CRI-O may send it
			// after the STOPPED, and a generator killed as it came never
			// kept it.
			h.stages |= stageStarted
		}
	}
	h.stages |= kindOf(ev.GetContainerEventType()).stage
	h.last = now
	h.live = h.live || from != missed
	return true
}

// podsWithHints returns the pods with hints; nil when none has.
func (b *hintBook) podsWithHints() map[string]*podHints {
	if len(b.pods) == 0 {
		return nil
	}
	out := make(map[string]*podHints, len(b.pods))
	for uid, ph := range b.pods {
		out[uid] = &podHints{name: ph.name, namespace: ph.namespace}
	}
	return out
}

// hintKey names a hinted container or sandbox.
type hintKey struct {
	id      string
	sandbox bool
}

// hinted is what the hints about a pod add to its relist: the transitions
// of items its record does not know, and the stages the stream reported of
// those it knows.
type hinted struct {
	extra []transition
	seen  map[hintKey]stage
}

// take consumes the hints of pod uid after a relist of it; known tells,
// for each hinted item, whether the relist's record knows it and whether
// the latest list still listed it.
//   - An item the record knows is reported by the relist. Its stages go
//     into seen, since they can tell of a state the relist came too late
//     to see. If the list still listed it, its DELETED came after the
//     list: the hint waits for the relist that finds it gone, so that the
//     removal is not taken for one the stream did not tell.
//   - An item the record does not know, that the stream said was deleted,
//     becomes transitions (extra), unless it was reported removed already.
//   - Any other hint waits, up to hintTTL, for a relist that settles it.
func (b *hintBook) take(
	uid string,
	known func(id string, sandbox bool) (known, listed bool),
	now time.Time,
) (h hinted) {
	ph := b.pods[uid]
	if ph == nil {
		return h
	}
	kept := ph.items[:0]
	for _, x := range ph.items {
		_, removed := b.removed[x.id]
		isKnown, listed := known(x.id, x.sandbox)
		switch {
		case isKnown:
			if h.seen == nil {
				h.seen = make(map[hintKey]stage)
			}
			h.seen[hintKey{x.id, x.sandbox}] = x.stages
			if listed && x.stages&stageDeleted != 0 && now.Sub(x.last) <= hintTTL {
				kept = append(kept, x)
				continue
			}
		case removed:
		case x.stages&stageDeleted != 0:
			h.extra = append(h.extra, x.transitions()...)
			b.removed[x.id] = now
		case now.Sub(x.last) > hintTTL:
		default:
			kept = append(kept, x)
			continue
		}
		if x.stages&stageDeleted != 0 {
			delete(b.owners, x.id)
		}
	}
	clear(ph.items[len(kept):])
	ph.items = kept
	if len(kept) == 0 {
		delete(b.pods, uid)
	}
	return h
}

// untoldRemovals returns the IDs of what was removed among ts, a pod's
// transitions, that no DELETED event told (seen holds what the events
// told of each item).
func untoldRemovals(ts []transition, seen map[hintKey]stage) (r stream.Removals) {
	for _, t := range ts {
		if t.new != stateNonExistent || seen[hintKey{t.id, t.sandbox}]&stageDeleted != 0 {
			continue
		}
		if t.sandbox {
			r.Sandboxes = append(r.Sandboxes, t.id)
		} else {
			r.Containers = append(r.Containers, t.id)
		}
	}
	return r
}

// tombstone records that containers were reported removed.
func (b *hintBook) tombstone(ts []transition, now time.Time) {
	for _, t := range ts {
		if t.new == stateNonExistent {
			b.removed[t.id] = now
			delete(b.owners, t.id)
		}
	}
}

// restore takes the tombstones of containers a Store says were reported
// removed, those recent enough to keep.
func (b *hintBook) restore(removed map[string]time.Time, now time.Time) {
	for id, at := range removed {
		if now.Sub(at) <= tombstoneTTL {
			b.removed[id] = at
		}
	}
}

// isRemoved reports whether container or sandbox id was reported removed.
func (b *hintBook) isRemoved(id string) bool {
	_, ok := b.removed[id]
	return ok
}

// prune forgets old tombstones, hints no relist settled, and the owners of
// IDs that no record knows (known) and no event named for hintTTL. It runs
// after a global relist, when the records know every listed ID.
func (b *hintBook) prune(now time.Time, known func(uid, id string) bool) {
	for id, at := range b.removed {
		if now.Sub(at) > tombstoneTTL {
			delete(b.removed, id)
		}
	}
	for uid, ph := range b.pods {
		ph.items = slices.DeleteFunc(ph.items, func(h *hint) bool { return now.Sub(h.last) > hintTTL })
		if len(ph.items) == 0 {
			delete(b.pods, uid)
		}
	}
	for id, o := range b.owners {
		if now.Sub(o.learned) > hintTTL && !known(o.uid, id) {
			delete(b.owners, id)
		}
	}
}

// size returns how many hints, owners and tombstones the book holds, for
// tests of its bounds.
func (b *hintBook) size() (hints, owners, removed int) {
	for _, ph := range b.pods {
		hints += len(ph.items)
	}
	return hints, len(b.owners), len(b.removed)
}
