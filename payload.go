// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// Event payloads.
//
// A ContainerEventResponse carries the status of the pod's sandbox and of
// its containers as the runtime saw them when it sent the event. The relist
// loop, the one writer of the cache, applies such a payload at once: it
// moves the pod's record forward with the statuses the payload holds, with
// the same state machine as a relist, writes the cache entry and delivers
// the events, in milliseconds instead of after a relist of the pod. Then it
// still relists the pod, as the confirmation: that finds nothing new in the
// common case, and corrects what the payload got wrong.
//
// A payload never moves a pod backwards. A container or sandbox only goes
// forward in its life (created, running, exited, removed), and what the
// runtime reports of it follows: its state ranks higher, or its status
// gained a start or finish time. So a status in a payload replaces what is
// known only when it ranks higher, and a container that was reported
// removed never comes back. A replayed or reordered event therefore changes
// nothing it should not, whatever the clocks say. The cache entry keeps the
// time of the last relist that observed the pod, so GetNewerThan keeps its
// meaning: the relist that confirms the payload moves it.
//
// A payload that is partial or contradicts its own event takes the relist
// path alone (hints.go), counted by reason; so do replayed backlog, and
// events about a pod whose inspection fails.

// Reasons a payload is not applied: the reason label of
// pleg_evented_payload_fallbacks_total.
const (
	fallbackReplayed   = "replayed"
	fallbackNoPod      = "no_pod"
	fallbackNoSandbox  = "no_sandbox_status"
	fallbackNoSubject  = "no_subject_status"
	fallbackContradict = "contradicts_event"
	fallbackMalformed  = "malformed"
	fallbackFailingPod = "failing_pod"
	fallbackRefused    = "cache_refused"
	// fallbackHintsPending: earlier events of the pod wait as hints for
	// its relist, and this one must not overtake them.
	fallbackHintsPending = "hints_pending"
	// fallbackOvertaken: a relist listed the pod after the event came, or
	// is listing or inspecting it as the event comes.
	fallbackOvertaken = "overtaken_by_relist"
)

// fallbackReasons are the reason label's values, for metrics to start at
// zero.
var fallbackReasons = []string{
	fallbackReplayed,
	fallbackNoPod,
	fallbackNoSandbox,
	fallbackNoSubject,
	fallbackContradict,
	fallbackMalformed,
	fallbackFailingPod,
	fallbackRefused,
	fallbackHintsPending,
	fallbackOvertaken,
}

// payload is what an event says, read and checked.
type payload struct {
	uid, name, namespace string
	// stage is the step of its subject's life the event reports.
	stage stage
	// subject is the ID of the container or sandbox the event is about.
	subject string
	// sandbox is the pod's sandbox status; nil only for a DELETED event,
	// which needs none.
	sandbox    *runtimeapi.PodSandboxStatus
	containers []*runtimeapi.ContainerStatus
}

// readPayload checks that an event can be applied as it stands and returns
// what it says, or why it cannot be. pod finds the pod of an ID when the
// event has no sandbox status.
func readPayload(ev *runtimeapi.ContainerEventResponse, pod func(id string) string) (p payload, fallback string) {
	kind := kindOf(ev.GetContainerEventType())
	p.stage, p.subject = kind.stage, ev.GetContainerId()
	if p.stage == 0 || p.subject == "" {
		return p, fallbackMalformed
	}
	sb := ev.GetPodSandboxStatus()
	if md := sb.GetMetadata(); md.GetUid() != "" && sb.GetId() != "" {
		p.uid, p.name, p.namespace, p.sandbox = md.GetUid(), md.GetName(), md.GetNamespace(), sb
	}
	if p.stage == stageDeleted {
		// Removal is the whole news: it needs no status, only the pod,
		// and containerd sends none for a sandbox it removed.
		if p.uid == "" {
			p.uid = pod(p.subject)
		}
		if p.uid == "" {
			return p, fallbackNoPod
		}
		return p, ""
	}
	if p.sandbox == nil {
		return p, fallbackNoSandbox
	}
	var subject *runtimeapi.ContainerStatus
	for _, c := range ev.GetContainersStatuses() {
		if c.GetId() == "" || c.GetMetadata() == nil {
			return p, fallbackMalformed
		}
		if uid := c.GetLabels()[runtime.PodUIDLabel]; uid != "" && uid != p.uid {
			return p, fallbackMalformed
		}
		if c.GetId() == p.subject {
			subject = c
		}
		p.containers = append(p.containers, c)
	}
	var got state
	if p.subject == p.sandbox.GetId() {
		got, _ = sandboxState(p.sandbox.GetState())
	} else {
		if subject == nil {
			return p, fallbackNoSubject
		}
		got, _ = containerState(subject.GetState())
	}
	// The snapshot must be at least as far on as the event.
	if got.rankFrom() < kind.need {
		return p, fallbackContradict
	}
	return p, ""
}

// applyPayload applies an event's payload to its pod, as the package
// comment above says, and queues the confirming relist. It returns the
// reason it did not, if it did not. Callers hold relistMu.
func (g *Generator) applyPayload(e queuedEvent, p payload) (fallback string) {
	st := &g.st
	if g.health.InspectionFailing(p.uid) {
		// Its record lags behind its inspections; the relist catches up.
		return fallbackFailingPod
	}
	rec, known := st.records[p.uid]
	if !known {
		rec = &podRecord{uid: p.uid}
	}
	if rec.name == "" && rec.namespace == "" {
		rec.name, rec.namespace = p.name, p.namespace
	}

	moved := st.moveForward(rec, p)
	transitions := payloadTransitions(rec, p)
	if len(transitions) == 0 {
		return ""
	}
	u := podUpdate{
		rec:      rec,
		status:   mergeStatus(g.cache, rec, moved, p),
		cachedAt: rec.modified,
		change:   &podChange{podRef: rec.ref(), observed: e.received, transitions: transitions},
		event:    e.ev,
	}
	if !g.emit(&g.single, &u) {
		return fallbackRefused
	}
	if !known {
		st.records[rec.uid] = rec
	}
	if st.moved != nil {
		st.moved[rec.uid] = struct{}{}
	}
	g.flush(&g.single)
	g.requests.add(rec.uid, e.received)
	return ""
}

// movedStatuses are the payload's statuses of the items it moved forward.
type movedStatuses struct {
	sandbox    *runtimeapi.PodSandboxStatus
	containers []*runtimeapi.ContainerStatus
}

// replaces reports whether a moved status replaces item id's.
func (m *movedStatuses) replaces(id string, sandbox bool) bool {
	if sandbox {
		return m.sandbox != nil && m.sandbox.GetId() == id
	}
	return slices.ContainsFunc(m.containers, func(c *runtimeapi.ContainerStatus) bool { return c.GetId() == id })
}

// moveForward sets what the pod will be, rec.cur: what is known,
// each item moved forward by the payload, never back. It returns the
// payload's status of each item it moved.
func (st *relistState) moveForward(rec *podRecord, p payload) (moved movedStatuses) {
	next := slices.Clone(rec.old)
	forward := func(e entry) bool {
		if st.hints.isRemoved(e.id) {
			return false
		}
		i, found := slices.BinarySearchFunc(next, &e, func(x entry, y *entry) int { return compareEntries(&x, y) })
		switch {
		case !found:
			next = slices.Insert(next, i, e)
		case e.state.rankFrom() > next[i].state.rankFrom():
			next[i].state = e.state
			if e.name != "" {
				next[i].name = e.name
			}
		default:
			return false
		}
		return true
	}
	if p.stage == stageDeleted {
		next = slices.DeleteFunc(next, func(x entry) bool { return x.id == p.subject })
	} else {
		s, _ := sandboxState(p.sandbox.GetState())
		if forward(entry{id: p.sandbox.GetId(), state: s, sandbox: true}) {
			moved.sandbox = p.sandbox
		}
		for _, c := range p.containers {
			s, _ := containerState(c.GetState())
			if forward(entry{id: c.GetId(), name: c.GetMetadata().GetName(), state: s}) {
				moved.containers = append(moved.containers, c)
			}
		}
	}
	rec.cur = next
	return moved
}

// payloadTransitions are the transitions from what the pod was to what the
// payload moved it to: the subject's expanded to the stages its event
// implies, the others as they are.
func payloadTransitions(rec *podRecord, p payload) []transition {
	seen := p.stage
	for _, c := range p.containers {
		if c.GetId() == p.subject && c.GetStartedAt() > 0 {
			// It ran, in whatever order its events come: CRI-O may send
			// the STOPPED of a container that exits at once before its
			// STARTED, whose payload then moves nothing.
			seen |= stageStarted
		}
	}
	var transitions []transition
	for _, t := range rec.transitions() {
		if t.id == p.subject {
			transitions = append(transitions, expand(t, seen)...)
		} else {
			// The payload shows other items of a restored pod as they
			// became while no generator watched.
			t.afterRestart = rec.restored
			transitions = append(transitions, t)
		}
	}
	return transitions
}

// mergeStatus returns the pod's cached status with the statuses of the
// items the payload moved forward put in, and a removed subject taken
// out.
func mergeStatus(cache Cache, rec *podRecord, moved movedStatuses, p payload) *runtime.PodStatus {
	cached, _ := cache.Get(rec.uid)
	var sandboxes []*runtimeapi.PodSandboxStatus
	var containers []*runtimeapi.ContainerStatus
	keep := func(id string, sandbox bool) bool {
		return !moved.replaces(id, sandbox) && (p.stage != stageDeleted || id != p.subject)
	}
	if cached != nil {
		for _, s := range cached.Sandboxes {
			if keep(s.GetId(), true) {
				sandboxes = append(sandboxes, s)
			}
		}
		for _, c := range cached.Containers {
			if keep(c.GetId(), false) {
				containers = append(containers, c)
			}
		}
	}
	if moved.sandbox != nil {
		sandboxes = append(sandboxes, moved.sandbox)
	}
	containers = append(containers, moved.containers...)
	return runtime.NewPodStatus(rec.uid, rec.name, rec.namespace, sandboxes, containers)
}
