// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/trace"
	"github.com/plegkit/pleg/runtime"
)

// outbox holds the changes of pods, found by a relist (relist.go) or an
// event's payload (payload.go), applied one after another, to be kept
// in the store with one commit, then delivered in order: nothing is seen
// that a restart would forget, and a relist of many pods costs the store
// a write per batch, not per pod.
type outbox struct {
	changes []*podChange
	ends    []int // where each change's events end in events
	events  []Event
	reports []PodReport
}

// deliver delivers one pod's change at once, through an outbox kept for
// it: an event applied from its payload allocates none. Callers hold
// relistMu.
func (g *Generator) deliver(rec *podRecord, change *podChange, status *runtime.PodStatus) {
	g.addChange(&g.single, rec, change, status)
	g.flush(&g.single)
}

// addChange logs a pod's change the kubelet's way and puts it in out, with
// what is now reported of the pod (rec, advanced). Callers hold relistMu.
func (g *Generator) addChange(out *outbox, rec *podRecord, change *podChange, status *runtime.PodStatus) {
	if len(change.transitions) == 0 && !change.podSync && !change.conditionMet {
		return
	}
	change.transitions = ranWhileAway(change.transitions, status)
	withDetails(rec, change.transitions, status)
	for i := range change.transitions {
		t := &change.transitions[i]
		g.log.Debug("GenericPLEG", "podUID", change.uid, "containerID", t.id, "sandbox", t.sandbox, "oldState", t.old,
			"newState", t.new)
		if t.new == stateExited && !t.sandbox && status != nil {
			if c := status.FindContainerByID(t.id); c != nil {
				g.log.Debug("Generic (PLEG): container finished", "podID", change.uid, "containerID", t.id,
					"exitCode", c.GetExitCode())
			}
		}
	}
	out.changes = append(out.changes, change)
	out.events = change.appendEvents(out.events)
	out.ends = append(out.ends, len(out.events))
	out.reports = append(out.reports, rec.report())
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
	g.traceEvents(trace.Committed, out.events)
	start := 0
	for i, c := range out.changes {
		g.out.publish(c, out.events[start:out.ends[i]])
		g.traceEvents(trace.Published, out.events[start:out.ends[i]])
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

// podIPs keeps the IPs of a pod whose sandboxes have all been torn down:
// the API expects a finished pod to keep reporting the IP it had. A pod
// with a ready sandbox reports what that sandbox reports, even nothing.
func (g *Generator) podIPs(uid string, status *runtime.PodStatus) []string {
	if len(status.IPs) > 0 {
		return status.IPs
	}
	for _, sb := range status.Sandboxes {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return status.IPs
		}
	}
	cached, err := g.cache.Get(uid)
	if err != nil || cached == nil {
		return nil
	}
	return cached.IPs
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

// withDetails gives each container transition the container's status as
// inspected for the change, the one status in the cache when the events
// are delivered, and keeps it in the record for the container's removal.
// A transition whose container the status does not hold keeps what the
// record had. One allocation per change, whatever its size.
func withDetails(rec *podRecord, ts []transition, status *runtime.PodStatus) {
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
		if e := findContainer(rec.old, t.id); e != nil {
			e.detail = d
		}
	}
}

func findSandbox(status *runtime.PodStatus, id string) *runtimeapi.PodSandboxStatus {
	for _, sb := range status.Sandboxes {
		if sb.GetId() == id {
			return sb
		}
	}
	return nil
}
