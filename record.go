// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"cmp"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// entry is one container or sandbox of a pod as one list saw it.
type entry struct {
	id      string
	name    string // container name; empty for sandboxes
	state   state
	sandbox bool

	// The list item, for inspection; only set in podRecord.cur.
	sb *runtimeapi.PodSandbox
	c  *runtimeapi.Container

	// detail is what the container's last inspected status told, kept
	// so that its removal, which has no status, can still name its image.
	detail *detail
}

// detail is what a container's inspected status tells its events (see
// Event). It is never changed once made: events and records share it.
type detail struct {
	image   string
	attempt uint32
	// exited is set when the status is of an exited container; the
	// exit fields mean something only then.
	exited          bool
	exitCode        int32
	reason, message string
	finished        int64 // CRI nanoseconds; 0 for none
}

// set fills d from a container's status.
func (d *detail) set(c *runtimeapi.ContainerStatus) {
	*d = detail{
		image:   cmp.Or(c.GetImage().GetImage(), c.GetImageRef()),
		attempt: c.GetMetadata().GetAttempt(),
	}
	if c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		d.exited, d.exitCode, d.reason, d.message = true, c.GetExitCode(), c.GetReason(), c.GetMessage()
		d.finished = c.GetFinishedAt()
	}
}

// compareEntries orders a pod's sandboxes before its containers, each by
// ID. Sandboxes come first because runtimes list them first, so a pod's
// entries usually arrive sorted already.
func compareEntries(a, b *entry) int {
	if a.sandbox != b.sandbox {
		if a.sandbox {
			return -1
		}
		return 1
	}
	return strings.Compare(a.id, b.id)
}

// podRecord is what the generator remembers of one pod: its containers as
// of the last time it was reconciled (old) and as of the latest list (cur).
// Both are sorted with compareEntries, so comparing them is one walk.
type podRecord struct {
	uid       string
	name      string
	namespace string

	old []entry
	cur []entry

	// listedPass is the number of the last list pass that saw the pod.
	listedPass uint64
	// runningSandbox is set when the latest list saw a ready sandbox.
	runningSandbox bool
	// modified is the time of the observation the pod's cache entry came
	// from: the start of the relist that last wrote it.
	modified time.Time
	// restored is set on a record a Store restored until its first
	// reconcile: that inspects the pod whether it changed or not, since
	// the cache knows nothing of it, and marks what changed afterRestart.
	restored bool
}

// startListing resets what the latest list saw, keeping the memory.
func (r *podRecord) startListing(pass uint64) {
	r.listedPass = pass
	r.cur = r.cur[:0]
	r.name, r.namespace = "", ""
	r.runningSandbox = false
}

// finishListing sorts what the latest list saw and drops repeated IDs,
// returning the IDs dropped. Lists usually come sorted, and a sorted list
// costs one walk.
func (r *podRecord) finishListing() (duplicates []string) {
	sorted := true
	for i := 1; i < len(r.cur) && sorted; i++ {
		sorted = compareEntries(&r.cur[i-1], &r.cur[i]) <= 0
	}
	if !sorted {
		// Stable: of two items with one ID, the first listed stays.
		slices.SortStableFunc(r.cur, func(a, b entry) int { return compareEntries(&a, &b) })
	}
	for i := 1; i < len(r.cur); i++ {
		if compareEntries(&r.cur[i-1], &r.cur[i]) == 0 {
			duplicates = append(duplicates, r.cur[i].id)
		}
	}
	if len(duplicates) > 0 {
		r.cur = slices.CompactFunc(r.cur, func(a, b entry) bool { return compareEntries(&a, &b) == 0 })
	}
	return duplicates
}

// vanish records that the latest list did not see the pod.
func (r *podRecord) vanish() { r.cur = r.cur[:0] }

// unchanged reports whether the latest list saw every container in the
// state recorded at the last reconcile.
func (r *podRecord) unchanged() bool {
	if len(r.old) != len(r.cur) {
		return false
	}
	for i := range r.old {
		if r.old[i].id != r.cur[i].id || r.old[i].sandbox != r.cur[i].sandbox || r.old[i].state != r.cur[i].state {
			return false
		}
	}
	return true
}

// transitions returns the state changes from old to cur in the kubelet's
// order: first what was known before, then what is new, each containers
// before sandboxes.
func (r *podRecord) transitions() []transition {
	var out []transition
	for _, sandboxes := range [2]bool{false, true} {
		for i := range r.old {
			o := &r.old[i]
			if o.sandbox != sandboxes {
				continue
			}
			now := stateNonExistent
			if c, ok := find(r.cur, o); ok {
				now = c.state
			}
			if now != o.state {
				out = append(out, transition{id: o.id, name: o.name, sandbox: o.sandbox, old: o.state, new: now, detail: o.detail})
			}
		}
	}
	for _, sandboxes := range [2]bool{false, true} {
		for i := range r.cur {
			c := &r.cur[i]
			if c.sandbox != sandboxes {
				continue
			}
			if _, ok := find(r.old, c); !ok && c.state != stateNonExistent {
				out = append(out, transition{id: c.id, name: c.name, sandbox: c.sandbox, old: stateNonExistent, new: c.state})
			}
		}
	}
	return out
}

// find looks e up in entries sorted with compareEntries.
func find(entries []entry, e *entry) (*entry, bool) {
	i, ok := slices.BinarySearchFunc(entries, e, func(x entry, y *entry) int { return compareEntries(&x, y) })
	if !ok {
		return nil, false
	}
	return &entries[i], true
}

// findContainer is find for container id, without a key that escapes
// to the heap.
func findContainer(entries []entry, id string) *entry {
	i, ok := slices.BinarySearchFunc(entries, id, func(x entry, id string) int {
		if x.sandbox {
			return -1 // sandboxes sort first
		}
		return strings.Compare(x.id, id)
	})
	if !ok {
		return nil
	}
	return &entries[i]
}

// knows reports whether the record has the container or sandbox id, as
// known before or as just listed.
func (r *podRecord) knows(id string, sandbox bool) bool {
	known, _ := r.sees(id, sandbox)
	return known
}

// sees is knows, and whether the latest list listed the item.
func (r *podRecord) sees(id string, sandbox bool) (known, listed bool) {
	e := entry{id: id, sandbox: sandbox}
	_, inOld := find(r.old, &e)
	_, inCur := find(r.cur, &e)
	return inOld || inCur, inCur
}

// advance makes what the latest list saw the pod's known state. The list
// items are dropped from it so the record does not pin old lists in memory.
func (r *podRecord) advance() {
	r.restored = false
	for i := range r.cur {
		// A list makes new entries: the containers' details go on.
		if c := &r.cur[i]; c.detail == nil && !c.sandbox {
			if o, ok := find(r.old, c); ok {
				c.detail = o.detail
			}
		}
	}
	r.old, r.cur = r.cur, r.old[:0]
	for i := range r.old {
		r.old[i].sb, r.old[i].c = nil, nil
	}
}

// pod returns the pod as the latest list saw it, for inspection.
func (r *podRecord) pod() *runtime.Pod {
	p := &runtime.Pod{UID: r.uid, Name: r.name, Namespace: r.namespace}
	for _, e := range r.cur {
		switch {
		case e.sb != nil:
			p.Sandboxes = append(p.Sandboxes, e.sb)
		case e.c != nil:
			p.Containers = append(p.Containers, e.c)
		}
	}
	return p
}

// podRef names a pod in events.
type podRef struct {
	uid, name, namespace string
}

// ref names the record's pod.
func (r *podRecord) ref() podRef { return podRef{uid: r.uid, name: r.name, namespace: r.namespace} }

func (r podRef) event(typ EventType, observed time.Time) Event {
	return Event{Type: typ, PodUID: r.uid, PodName: r.name, PodNamespace: r.namespace, Observed: observed}
}

// appendTransition appends the events t delivers: the kubelet's table
// without ContainerChanged.
func (r podRef) appendTransition(out []Event, t transition, observed time.Time) []Event {
	types, n := transitionEvents(t.old, t.new)
	for _, typ := range types[:n] {
		if typ == ContainerChanged {
			continue
		}
		ev := r.event(typ, observed)
		ev.ContainerID, ev.ContainerName, ev.Sandbox = t.id, t.name, t.sandbox
		if t.afterRestart {
			ev.AfterRestart, ev.StartedAt, ev.FinishedAt = true, criTime(t.started), criTime(t.finished)
		}
		if d := t.detail; d != nil && !t.sandbox {
			ev.Image, ev.Attempt = d.image, &d.attempt
			// Only an exit the runtime reported: a container that vanished
			// unseen dies without one, its detail being of its start. A
			// folded Died (subscription) keeps the exit it folded in.
			if typ == ContainerDied && d.exited {
				ev.ExitCode, ev.Reason, ev.Message = &d.exitCode, d.reason, d.message
				if ev.FinishedAt.IsZero() {
					ev.FinishedAt = criTime(d.finished)
				}
			}
		}
		out = append(out, ev)
	}
	return out
}

// podChange is what one reconcile of one pod produced: the container
// transitions, in the kubelet's order, and the pod-level events.
type podChange struct {
	podRef
	observed     time.Time
	transitions  []transition
	podSync      bool
	conditionMet bool
}

// events returns the change as the events the kubelet would send, in order.
func (c *podChange) events() []Event { return c.appendEvents(nil) }

// appendEvents appends the change's events to dst.
func (c *podChange) appendEvents(dst []Event) []Event {
	// All its transitions were observed together: one slot.
	return c.appendPodEvents(dst, []slot{{ts: c.transitions, observed: c.observed}}, podEvents{
		podSync: c.podSync, syncAt: c.observed,
		conditionMet: c.conditionMet, conditionAt: c.observed,
	})
}

// podEvents are the events of a pod rather than of one of its containers,
// and when each was observed.
type podEvents struct {
	podSync, conditionMet bool
	syncAt, conditionAt   time.Time
}

// appendPodEvents appends a pod's events in the order the kubelet sends
// them: its containers' transitions, slot by slot, each slot's at the time
// it was observed, then PodSync, then ConditionMet. A change (podChange)
// and what a subscriber has pending of a pod (pendingPod) both tell their
// events through it.
func (r podRef) appendPodEvents(dst []Event, slots []slot, p podEvents) []Event {
	// Grown at once: an Event is some 250 bytes, and growing the slice
	// by appending would allocate it about twice over.
	n := 0
	for _, sl := range slots {
		for _, t := range sl.ts {
			n += deliverable(t.old, t.new)
		}
	}
	if p.podSync {
		n++
	}
	if p.conditionMet {
		n++
	}
	if n == 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	for _, sl := range slots {
		for _, t := range sl.ts {
			dst = r.appendTransition(dst, t, sl.observed)
		}
	}
	if p.podSync {
		dst = append(dst, r.event(PodSync, p.syncAt))
	}
	if p.conditionMet {
		dst = append(dst, r.event(ConditionMet, p.conditionAt))
	}
	return dst
}

// report is what the record says was last reported of its pod.
func (r *podRecord) report() PodReport {
	p := PodReport{UID: r.uid, Name: r.name, Namespace: r.namespace}
	if len(r.old) > 0 {
		p.Items = make([]ItemReport, len(r.old))
	}
	for i, e := range r.old {
		p.Items[i] = ItemReport{ID: e.id, Name: e.name, Sandbox: e.sandbox, State: e.state.report()}
	}
	return p
}

// ranWhileAway completes what a restart found with what the runtime says
// of each item: the times a container started and finished, and for one
// last reported not yet running (unknown to the records, or created) that
// is found exited, that it ran first. Its Started was never reported: a
// store keeps what was reported with the events, so a record without it
// means the event was never delivered (a generator killed between an
// event and its commit, say). The kubelet's relist reports such a
// container Died alone; this one reports it Started, with its start time,
// then Died.
func ranWhileAway(ts []transition, status *runtime.PodStatus) []transition {
	if status == nil || !slices.ContainsFunc(ts, func(t transition) bool { return t.afterRestart }) {
		return ts
	}
	out := make([]transition, 0, len(ts)+1)
	for _, t := range ts {
		if !t.afterRestart {
			out = append(out, t)
			continue
		}
		if t.sandbox {
			if sb := findSandbox(status, t.id); sb != nil {
				t.started = sb.GetCreatedAt()
			}
		} else if c := status.FindContainerByID(t.id); c != nil {
			t.started, t.finished = c.GetStartedAt(), c.GetFinishedAt()
		}
		if (t.old == stateNonExistent || t.old == stateUnknown) && t.new == stateExited && t.started > 0 {
			ran := t
			ran.new, ran.finished = stateRunning, 0
			out = append(out, ran)
			t.old = stateRunning
		}
		out = append(out, t)
	}
	return out
}

// keepDetails gives each container transition the container's status as
// inspected for the change, the one status in the cache when the events
// are delivered, and keeps it in the record for the container's removal.
// A transition whose container the status does not hold keeps what the
// record had. One allocation per change, whatever its size.
func (r *podRecord) keepDetails(ts []transition, status *runtime.PodStatus) {
	if status == nil {
		return
	}
	var details []detail
	for i := range ts {
		t := &ts[i]
		if t.sandbox {
			continue
		}
		c := status.FindContainerByID(t.id)
		if c == nil {
			continue
		}
		if details == nil {
			details = make([]detail, len(ts))
		}
		d := &details[i]
		d.set(c)
		t.detail = d
		if e := findContainer(r.old, t.id); e != nil {
			e.detail = d
		}
	}
}

// findSandbox returns the status of sandbox id in status, or nil.
func findSandbox(status *runtime.PodStatus, id string) *runtimeapi.PodSandboxStatus {
	for _, sb := range status.Sandboxes {
		if sb.GetId() == id {
			return sb
		}
	}
	return nil
}

// criTime is a CRI timestamp, in nanoseconds since the epoch, as a time;
// zero for none.
func criTime(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
