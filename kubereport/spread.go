// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"time"
)

// A fleet's nodes see a common cause at once: a runtime upgrade that
// hangs, a registry outage, their recovery. Were each node to write the
// moment it sees the change, the API server would take one write per node
// in the same second. The reporter spreads them as the kubelets spread
// their own node status, each of which syncs every 10 s at a moment of
// its own: a node writes the changes it sees (its condition, its events)
// at its own place in every spread window, drawn when it starts, so that a
// fleet's writes of a common change come evenly over the window, and none
// waits longer than the window, however the node's verdicts come and go.
// The first heartbeat after a change comes at a random point of the
// second half of the period, so that the fleet's heartbeats do not stay in
// step after a common change.

// spreader says when a node's writes may go.
type spreader struct {
	window time.Duration
	// place is the node's place in every window: its writes go at
	// place, window + place, 2 × window + place... from the Unix epoch.
	place time.Duration
	// rand returns a number in [0, 1), safe for concurrent use.
	rand func() float64
}

func newSpreader(window time.Duration, rand func() float64) spreader {
	return spreader{window: window, place: time.Duration(rand() * float64(window)), rand: rand}
}

// turn is the first moment from now that is the node's place in a
// window: when a write of a change seen at now may go.
func (s spreader) turn(now time.Time) time.Time {
	w := int64(s.window)
	into := (now.UnixNano() - int64(s.place)) % w
	if into < 0 {
		into += w
	}
	if into == 0 {
		return now
	}
	return now.Add(time.Duration(w - into))
}

// heartbeat is the wait before the first heartbeat after a change or a
// restart: period less a random part of its half, so that it still comes
// within the period that the condition's lastHeartbeatTime promises.
// The kubelet draws its own node status report after a change in the same
// spirit (5 min ± 2.5 min), past the period; pleg stays under it.
func (s spreader) heartbeat(period time.Duration) time.Duration {
	return period - time.Duration(s.rand()*float64(period/2))
}

// maxPendingEvents bounds the events waiting for their turn: more come
// only from a node whose every pod fails at once, and the pod events are
// already bounded (PodEventBurst) before they wait here.
const maxPendingEvents = 64

// pendingEvents are the events waiting for their turn, in the order they
// were decided: each is due no earlier than the one before it, so that a
// node's recovery is never told before its failure. The reporter's loop
// owns it.
type pendingEvents struct {
	items []pendingEvent
}

type pendingEvent struct {
	due time.Time
	e   event
}

// add queues e, due at due or when the event before it is, whichever is
// later. It reports false, queuing nothing, when the queue is full.
func (q *pendingEvents) add(e event, due time.Time) bool {
	if len(q.items) >= maxPendingEvents {
		return false
	}
	if n := len(q.items); n > 0 && due.Before(q.items[n-1].due) {
		due = q.items[n-1].due
	}
	q.items = append(q.items, pendingEvent{due: due, e: e})
	return true
}

// take removes and returns the events due at now, oldest first.
func (q *pendingEvents) take(now time.Time) []event {
	n := 0
	for n < len(q.items) && !q.items[n].due.After(now) {
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]event, n)
	for i := range n {
		out[i] = q.items[i].e
	}
	q.items = append(q.items[:0], q.items[n:]...)
	return out
}

// len is how many events wait.
func (q *pendingEvents) len() int { return len(q.items) }
