// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/internal/trace"
	"github.com/plegkit/pleg/runtime"
)

// Evented operation.
//
// A runtime's event stream tells that something happened to a pod, not
// always reliably what: containerd replays minutes of old events to a new
// subscriber, CRI-O drops events past 1000, and payloads are snapshots
// taken when sent. The stream supervisor (internal/stream) keeps the
// stream open and hands each event to the relist loop through a queue;
// the loop, the one writer of the cache, applies its payload (payload.go)
// or takes it as a hint (hints.go) for a relist of its pod. While the
// stream holds, global relists slow to EventedRelistPeriod, a safety net;
// while it is down they keep RelistPeriod, and the stream is retried for
// as long as it takes.

// streamSide is the generator as the stream machinery drives it
// (stream.Generator): a type of its own, so that its methods stay out of
// the Generator's exported API.
type streamSide struct{ g *Generator }

// Deliver runs on the stream's goroutine and only queues.
func (s streamSide) Deliver(ev *runtimeapi.ContainerEventResponse, connectedAt time.Time) {
	g := s.g
	now := g.clock.Now()
	if ev.GetCreatedAt() > 0 {
		g.metrics.EventedLatency.Observe(now.Sub(time.Unix(0, ev.GetCreatedAt())).Seconds())
	}
	g.tracer.event(trace.Received, ev)
	if !g.events.push(queuedEvent{ev: ev, connectedAt: connectedAt, received: now}) {
		g.metrics.EventsDropped.Inc()
	}
}

// StreamChanged asks for a global relist: what changed while the stream
// was down, or since it broke, only a list can tell.
func (s streamSide) StreamChanged(c stream.Change) {
	if c != stream.Connected {
		s.g.updateMode()
	}
	if c != stream.Failed {
		s.g.requestGlobalRelist()
	}
}

// RelistPod queues a relist of pod uid, counted by why it is asked for.
func (s streamSide) RelistPod(uid string, why stream.Reason) {
	switch why {
	case stream.RemovalUnseen:
		s.g.metrics.RemovalWatchRelists.Inc()
	case stream.RetryFailed:
		s.g.metrics.InspectionRetries.Inc()
	}
	s.g.requests.add(uid, s.g.clock.Now())
}

// handleEvents applies the queued events. Callers hold relistMu.
func (g *Generator) handleEvents() {
	events, overflowed := g.events.take()
	if overflowed {
		g.log.Warn("Container events came faster than they could be handled; "+
			"some were dropped and a relist will find what they said", "limit", maxQueuedEvents)
		g.requestGlobalRelist()
	}
	for _, e := range events {
		g.tracer.event(trace.Dequeued, e.ev)
		g.handleEvent(e, "")
	}
}

// absorbEvents takes the queued events of pod, or of every pod if pod is
// "", as hints, after a relist listed it: what the relist listed is newer
// than those events, so their payloads would tell it late, or out of
// order; as hints they tell what the lists came too late to see. Callers
// hold relistMu.
func (g *Generator) absorbEvents(pod string) {
	for _, e := range g.events.takeIf(func(ev *runtimeapi.ContainerEventResponse) bool {
		return pod == "" || g.st.podOf(ev) == pod
	}) {
		g.handleEvent(e, fallbackOvertaken)
	}
}

// handleEvent applies an event's payload at once (payload.go), or takes
// the event as a hint, for the reason given if one is: it asks for a
// relist of its pod. Callers hold relistMu.
func (g *Generator) handleEvent(e queuedEvent, hintBecause string) {
	ev := e.ev
	// An event sent before we subscribed is backlog: it still asks for a
	// relist, but what it says is old news and reports nothing itself,
	// unless it was sent since the store began keeping what was reported.
	// Then it is what a runtime kept for its next subscriber while none
	// watched (containerd holds five minutes of it): it may tell of a
	// container that came and went meanwhile, which no relist can see.
	from := g.st.originOf(e)
	kind := kindOf(ev.GetContainerEventType())
	if kind.stage == stageDeleted && g.stream != nil {
		g.noteRemoval(ev, g.st.podOf(ev))
	}
	label := "replayed"
	if from == sentLive {
		label = kind.label
	}
	g.metrics.Hints.WithLabelValues(label).Inc()
	if !g.opts.HintOnly {
		fallback := fallbackReplayed
		if from == sentLive {
			fallback = hintBecause
		}
		if fallback == "" {
			var p payload
			p, fallback = readPayload(ev, g.st.podOfID)
			if fallback == "" && p.uid == g.st.listing && g.st.listingBack {
				if len(g.st.deferred) < maxDeferred {
					// Its pod's inspection is in flight, of what its lists
					// found: this event goes after it.
					g.st.deferred = append(g.st.deferred, deferredPayload{e, p})
					return
				}
				fallback = fallbackOvertaken
			}
			if fallback == "" {
				fallback = g.takePayload(e, p)
			}
			if fallback == "" {
				return
			}
		}
		g.metrics.PayloadFallbacks.WithLabelValues(fallback).Inc()
	}
	g.takeHint(e, from)
}

// podOf returns the pod an event is about: its sandbox's, the one an
// earlier event tied its ID to, or the one whose record knows the ID.
func (st *relistState) podOf(ev *runtimeapi.ContainerEventResponse) string {
	if uid := ev.GetPodSandboxStatus().GetMetadata().GetUid(); uid != "" {
		return uid
	}
	return st.podOfID(ev.GetContainerId())
}

// podOfID returns the pod of a container or sandbox ID, or "". Events
// without a sandbox status are rare (containerd's for a sandbox it
// removed); the walk over the records is for them.
func (st *relistState) podOfID(id string) string {
	if uid := st.hints.ownerOf(id); uid != "" || id == "" {
		return uid
	}
	for uid, rec := range st.records {
		if rec.knows(id, true) || rec.knows(id, false) {
			return uid
		}
	}
	return ""
}

// originOf tells when an event was sent: an event sent before we
// subscribed is backlog, and replayed unless it was sent since the store
// began keeping what was reported; then it was missed.
func (st *relistState) originOf(e queuedEvent) origin {
	sent := time.Unix(0, e.ev.GetCreatedAt())
	switch {
	case e.ev.GetCreatedAt() <= 0 || !sent.Before(e.connectedAt):
		return sentLive
	case !st.coveredSince.IsZero() && sent.After(st.coveredSince):
		return missed
	default:
		return replayed
	}
}

// maxDeferred bounds the events deferred behind one pod's inspection;
// past it they are taken as hints, for another relist of the pod.
const maxDeferred = 256

// deferredPayload is an event deferred behind its pod's inspection.
type deferredPayload struct {
	e queuedEvent
	p payload
}

// takePayload applies an event's payload unless the pod's hints wait for
// a relist, and tells why it did not. Callers hold relistMu.
func (g *Generator) takePayload(e queuedEvent, p payload) (fallback string) {
	if g.st.hints.pending(p.uid) {
		// Hints of the pod wait for a relist: this event goes after them,
		// or the relist would tell them late.
		return fallbackHintsPending
	}
	if fallback = g.applyPayload(e, p); fallback != "" {
		return fallback
	}
	if p.uid == g.st.listing {
		// Its pod's lists are in flight: what they return may be older
		// than this payload, and is thrown away.
		g.st.listingOvertaken = true
	}
	g.st.hints.learn(e.ev, p.uid, e.received)
	g.metrics.PayloadsApplied.Inc()
	return ""
}

// applyDeferred applies, in order, the payloads deferred behind a pod's
// inspection, now that its changes are delivered: one the inspection saw
// already moves nothing, one it missed reports what it says. Callers hold
// relistMu.
func (g *Generator) applyDeferred() {
	deferred := g.st.deferred
	g.st.deferred = nil
	for _, d := range deferred {
		if fallback := g.takePayload(d.e, d.p); fallback != "" {
			g.metrics.PayloadFallbacks.WithLabelValues(fallback).Inc()
			g.takeHint(d.e, sentLive)
		}
	}
}

// takeHint takes an event as a hint: a relist of its pod, asked for.
// Callers hold relistMu.
func (g *Generator) takeHint(e queuedEvent, from origin) {
	ev := e.ev
	g.tracer.event(trace.Hinted, ev)
	uid := g.st.podOf(ev)
	if !g.st.hints.note(ev, uid, g.st.records[uid], from, e.received) {
		g.log.Debug("Container event for a container of an unknown pod; the next relist will see it",
			"containerID", ev.GetContainerId(), "type", ev.GetContainerEventType())
		return
	}
	if !g.requests.add(uid, e.received) {
		g.metrics.HintsCoalesced.Inc()
	}
}

// period is the pause between global relists in force. A stream that
// does not tell some removals (CRI-O's, when a pod is removed) still
// drives: the removal watch finds what it leaves out.
func (g *Generator) period() time.Duration {
	if g.evented() {
		return g.opts.EventedRelistPeriod
	}
	return g.opts.RelistPeriod
}

// threshold is the health threshold in force.
func (g *Generator) threshold() time.Duration {
	if g.evented() {
		return g.opts.EventedRelistThreshold
	}
	return g.opts.RelistThreshold
}

// updateMode sets pleg_mode to 1 for the mode in force, 0 for the other.
func (g *Generator) updateMode() {
	inForce := ModeGeneric
	if g.evented() {
		inForce = ModeEvented
	}
	for _, m := range []Mode{ModeGeneric, ModeEvented} {
		v := 0.0
		if m == inForce {
			v = 1
		}
		g.metrics.Mode.WithLabelValues(string(m)).Set(v)
	}
}

// evented reports whether the event stream drives relists now.
func (g *Generator) evented() bool {
	return g.stream != nil && g.stream.State().Holding
}

// streamConnected reports whether the event stream is connected, held or
// not: its events may then tell of a removal before the runtime's lists
// stop showing the item.
func (g *Generator) streamConnected() bool {
	if g.stream == nil {
		return false
	}
	return g.stream.State().Connected
}

// newStream returns the supervisor of src's event stream, wired to the
// generator.
func (g *Generator) newStream(src runtime.EventSource) *stream.Supervisor {
	return stream.New(src, g.rt, streamSide{g}, g.health, stream.Config{
		Required:      g.opts.Mode == ModeEvented,
		NoStreamRetry: g.opts.NoStreamRetry,
		Clock:         g.clock,
		Logger:        g.log,
		Metrics:       g.metrics,
	})
}

// retryRelist asks for another relist of pod uid, whose relist failed,
// after a backoff, while the stream drives; then the global relist comes
// late. An inspection that passed its deadline (deadline) is not retried
// (see internal/stream/retries.go).
func (g *Generator) retryRelist(uid string, deadline bool) {
	if g.stream == nil || deadline || !g.evented() {
		return
	}
	g.stream.RelistFailed(uid)
}

// noteRemoval tells the stream supervisor that a DELETED event came, of
// the kind its subject shows: a sandbox's is a pod's removal. Callers
// hold relistMu.
func (g *Generator) noteRemoval(ev *runtimeapi.ContainerEventResponse, uid string) {
	id := ev.GetContainerId()
	k, known := stream.ContainerRemovals, false
	switch rec := g.st.records[uid]; {
	case ev.GetPodSandboxStatus().GetId() == id, rec != nil && rec.knows(id, true):
		k, known = stream.PodRemovals, true
	case rec != nil && rec.knows(id, false):
		known = true
	}
	g.stream.RemovalTold(id, k, known)
}

// requestGlobalRelist asks the loop for a global relist now.
func (g *Generator) requestGlobalRelist() { g.relistNow.notify() }
