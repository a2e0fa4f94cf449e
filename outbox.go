// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/internal/trace"
	"github.com/plegkit/pleg/runtime"
)

// The way out.
//
// A pod's change leaves the generator by one way, whichever found it: a
// relist's inspection (relist.go) or an event's payload (payload.go).
// emit writes the pod's status in the cache, advances its record, settles
// what the event stream follows, and puts the change, with what is now
// reported of the pod, in an outbox; flush keeps what the outbox holds in
// the store with one commit, then delivers it, in order. So nothing is
// seen that a restart would forget, a relist of many pods costs the store
// a write per batch rather than per pod, and every side effect of a
// change leaves from one place, as etcd's raft hands them all out in one
// Ready.

// podUpdate is one pod's change, as an inspection or a payload made it,
// on its way out.
type podUpdate struct {
	rec *podRecord
	// status is what to cache of the pod; nil for a pod gone.
	status *runtime.PodStatus
	// cachedAt is the time of the cache entry: the start of the relist
	// that inspected the pod, or, for a payload, the time of the entry it
	// moves on (the relist that confirms the payload moves the time).
	cachedAt time.Time
	change   *podChange
	// untold are the removals among the change's transitions that no
	// event told.
	untold stream.Removals
	// event is the runtime's event whose payload the change is; nil for
	// an inspection. The pod's watch conditions are evaluated on an
	// inspection's status only: a payload's is confirmed by the relist it
	// asks for.
	event *runtimeapi.ContainerEventResponse
}

// emit is the one way out of a pod's change: it writes the cache, then
// advances the pod's record, settles the change with the event stream's
// bookkeeping and puts it in out, to be flushed. It reports false, having
// done nothing, when the cache holds a newer status than this one.
// Callers hold relistMu.
func (g *Generator) emit(out *outbox, u *podUpdate) bool {
	rec, c := u.rec, u.change
	if u.status == nil {
		g.cache.Delete(rec.uid)
	} else {
		u.status.IPs = keptIPs(g.cache, rec.uid, u.status)
		if !g.cache.Set(rec.uid, u.status, nil, u.cachedAt) {
			return false
		}
		rec.modified = u.cachedAt
	}
	if u.event != nil {
		g.tracer.event(trace.Applied, u.event)
	} else if u.status != nil {
		c.conditionMet = g.conditions.evaluate(rec.uid, u.status)
	}
	rec.advance()
	g.settle(rec.uid, c.transitions, u.untold, c.observed)
	if len(c.transitions) == 0 && !c.podSync && !c.conditionMet {
		return true
	}
	c.transitions = ranWhileAway(c.transitions, u.status)
	rec.keepDetails(c.transitions, u.status)
	g.logChange(c, u.status)
	out.changes = append(out.changes, c)
	out.events = c.appendEvents(out.events)
	out.ends = append(out.ends, len(out.events))
	out.reports = append(out.reports, rec.report())
	return true
}

// keptIPs keeps the IPs cached of a pod whose sandboxes have all been torn
// down: the API expects a finished pod to keep reporting the IP it had. A
// pod with a ready sandbox reports what that sandbox reports, even nothing.
func keptIPs(cache Cache, uid string, status *runtime.PodStatus) []string {
	if len(status.IPs) > 0 {
		return status.IPs
	}
	for _, sb := range status.Sandboxes {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return status.IPs
		}
	}
	cached, err := cache.Get(uid)
	if err != nil || cached == nil {
		return nil
	}
	return cached.IPs
}

// settle takes what was just reported of pod uid, with the removals among
// it no event told, into what follows the event stream: a late DELETED
// must not report the removed again (the hints' tombstones), the removal
// watch follows what exited, and removals found untold teach what the
// stream leaves out. Without a stream there is nothing to follow.
// Callers hold relistMu.
func (g *Generator) settle(uid string, ts []transition, untold stream.Removals, observed time.Time) {
	if g.stream == nil {
		return
	}
	g.st.hints.tombstone(ts, observed)
	items := g.items[:0]
	for _, t := range ts {
		items = append(items, stream.Item{ID: t.id, Sandbox: t.sandbox, Now: itemState(t.new)})
	}
	g.stream.Reported(stream.Report{
		UID: uid, Items: items, Observed: observed,
		Untold: untold, LastObserved: g.st.prevRelist,
	})
	clear(items)
	g.items = items[:0]
}

// itemState is a state as the removal watch follows it.
func itemState(s state) stream.ItemState {
	switch s {
	case stateRunning:
		return stream.ItemRunning
	case stateExited:
		return stream.ItemExited
	case stateNonExistent:
		return stream.ItemRemoved
	default:
		return stream.ItemOther
	}
}

// logChange logs a pod's change the kubelet's way.
func (g *Generator) logChange(c *podChange, status *runtime.PodStatus) {
	for i := range c.transitions {
		t := &c.transitions[i]
		g.log.Debug("GenericPLEG", "podUID", c.uid, "containerID", t.id, "sandbox", t.sandbox, "oldState", t.old,
			"newState", t.new)
		if t.new == stateExited && !t.sandbox && status != nil {
			if ctr := status.FindContainerByID(t.id); ctr != nil {
				g.log.Debug("Generic (PLEG): container finished", "podID", c.uid, "containerID", t.id,
					"exitCode", ctr.GetExitCode())
			}
		}
	}
}

// outbox holds the changes of pods emitted one after another, to be kept
// in the store with one commit, then delivered in order.
type outbox struct {
	changes []*podChange
	ends    []int // where each change's events end in events
	events  []Event
	reports []PodReport
}

// flush commits what out holds to the store and then delivers it to the
// subscribers, in order, and empties out. Callers hold relistMu.
func (g *Generator) flush(out *outbox) {
	if len(out.changes) == 0 {
		return
	}
	if err := g.store.Commit(out.events, out.reports); err != nil {
		g.metrics.StoreFailures.Inc()
		g.log.Error("PLEG: Could not keep changes in the store; delivering them anyway, a restart may report them again",
			"pods", len(out.changes), "err", err)
	}
	g.tracer.events(trace.Committed, out.events)
	start := 0
	for i, c := range out.changes {
		g.out.publish(c, out.events[start:out.ends[i]])
		g.tracer.events(trace.Published, out.events[start:out.ends[i]])
		start = out.ends[i]
	}
	if cap(out.events) > maxKeptEvents {
		*out = outbox{}
		return
	}
	clear(out.changes)
	clear(out.events)
	clear(out.reports)
	out.changes, out.ends, out.events, out.reports = out.changes[:0], out.ends[:0], out.events[:0], out.reports[:0]
}

// maxKeptEvents bounds the events an outbox keeps room for from one flush
// to the next: a relist of a thousand pods, all of whose containers
// changed, delivers about 10,000, some 2.5 MB.
const maxKeptEvents = 1 << 14

// tracer tells Options.Trace, if set, the stages events pass inside the
// generator; without one it costs a nil check.
type tracer struct {
	f     trace.Func
	clock clock.PassiveClock
}

// event tells that the event ev tells of passed stage.
func (t tracer) event(stage trace.Stage, ev *runtimeapi.ContainerEventResponse) {
	if t.f == nil {
		return
	}
	typ := kindOf(ev.GetContainerEventType()).event
	if typ == "" {
		return
	}
	t.f(stage, ev.GetContainerId(), string(typ), t.clock.Now())
}

// events tells that events passed stage.
func (t tracer) events(stage trace.Stage, events []Event) {
	if t.f == nil {
		return
	}
	now := t.clock.Now()
	for i := range events {
		t.f(stage, events[i].ContainerID, string(events[i].Type), now)
	}
}
