// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What waits for the relist loop: the event stream's events, per-pod
// relist requests, the pods due for re-inspection, and the signal that
// wakes the loop for each.

// signal wakes whoever waits on it without ever blocking whoever gives
// it: signals given while no one waits fold into one.
type signal chan struct{}

func newSignal() signal { return make(signal, 1) }

// notify leaves a token, unless one is waiting already.
func (s signal) notify() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// maxQueuedEvents bounds the events waiting for the relist loop, which a
// relist of many pods or a hung one can keep busy. Past it, events are
// dropped and a global relist finds what they said.
const maxQueuedEvents = 4096

// queuedEvent is an event as the stream delivered it.
type queuedEvent struct {
	ev          *runtimeapi.ContainerEventResponse
	connectedAt time.Time // when its stream connected
	received    time.Time
}

// eventQueue carries the stream's events to the relist loop. The stream's
// reader never waits on it.
type eventQueue struct {
	mu    sync.Mutex
	items []queuedEvent
	// overflowed tells that events were dropped since the last take.
	overflowed bool
	// ready is notified when events are queued.
	ready signal
}

func newEventQueue() *eventQueue { return &eventQueue{ready: newSignal()} }

// push queues an event, or drops it when the queue is full, and reports
// whether it queued it.
func (q *eventQueue) push(e queuedEvent) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	queued := len(q.items) < maxQueuedEvents
	if queued {
		q.items = append(q.items, e)
	} else {
		q.overflowed = true
	}
	q.ready.notify()
	return queued
}

// take returns what is queued, and whether events were dropped since the
// last take.
func (q *eventQueue) take() (events []queuedEvent, overflowed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	events, overflowed = q.items, q.overflowed
	q.items, q.overflowed = nil, false
	return events, overflowed
}

// takeIf removes and returns the queued events match selects, in order.
func (q *eventQueue) takeIf(match func(*runtimeapi.ContainerEventResponse) bool) []queuedEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	var taken []queuedEvent
	kept := q.items[:0]
	for _, e := range q.items {
		if match(e.ev) {
			taken = append(taken, e)
		} else {
			kept = append(kept, e)
		}
	}
	clear(q.items[len(kept):])
	q.items = kept
	return taken
}

// requestQueue holds per-pod relist requests: one slot per pod, served in
// the order pods were first requested. The kubelet's queue is a channel of
// 200 that drops requests when full and keeps duplicates; here a pod's
// repeated requests coalesce, so the queue is bounded by the number of
// pods and never drops.
type requestQueue struct {
	mu sync.Mutex
	// at holds, for each pending pod, the time of its latest request: a
	// global relist that started after it serves the pod's every request.
	at    map[string]time.Time
	order []string
	// ready is notified while requests are pending.
	ready signal
}

func newRequestQueue() *requestQueue {
	return &requestQueue{at: make(map[string]time.Time), ready: newSignal()}
}

// add queues a request for uid, or joins the one pending, and reports
// whether it queued a new one.
func (q *requestQueue) add(uid string, at time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, pending := q.at[uid]
	if !pending {
		q.order = append(q.order, uid)
	}
	q.at[uid] = at
	q.ready.notify()
	return !pending
}

// pop removes the oldest pending pod.
func (q *requestQueue) pop() (uid string, at time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return "", time.Time{}, false
	}
	uid, q.order = q.order[0], q.order[1:]
	at = q.at[uid]
	delete(q.at, uid)
	if len(q.order) > 0 {
		q.ready.notify()
	}
	return uid, at, true
}

func (q *requestQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// podSet is a set of pod UIDs safe for concurrent use: the pods due for
// re-inspection.
type podSet struct {
	mu  sync.Mutex
	set map[string]struct{}
}

func (s *podSet) add(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set[uid] = struct{}{}
}

// take removes uid and reports whether it was there.
func (s *podSet) take(uid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.set[uid]
	delete(s.set, uid)
	return ok
}

// takeAll empties the set and returns what it held; nil when empty.
func (s *podSet) takeAll() map[string]struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.set) == 0 {
		return nil
	}
	all := s.set
	s.set = make(map[string]struct{})
	return all
}
