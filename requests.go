// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"sync"
	"time"
)

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
	// ready has a token while requests are pending.
	ready chan struct{}
}

func newRequestQueue() *requestQueue {
	return &requestQueue{at: make(map[string]time.Time), ready: make(chan struct{}, 1)}
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
	q.signal()
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
		q.signal()
	}
	return uid, at, true
}

func (q *requestQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// signal leaves a token in ready. Callers hold mu.
func (q *requestQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
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
