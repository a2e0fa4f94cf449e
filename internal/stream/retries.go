// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Retries.
//
// While the event stream drives, a pod is relisted when an event asks,
// and the global relist comes only every EventedRelistPeriod: a pod whose
// relist failed, its lists or its inspection, would keep its events
// waiting that long. So a failed relist of a pod is asked for again after
// a backoff, from retryMin doubling to RetryCap, well before the global
// relist. The work stays bounded when the runtime is down: a pod has one
// retry pending at most, and while the runtime's lists fail, one retry in
// RetryCap goes to the runtime, as a probe, and the others wait for it to
// answer. A pod whose inspection passed InspectTimeout is left to the
// global relist: its retries would hold up other pods' relists, which run
// one at a time, each time for that long.

const (
	// retryMin is a pod's first backoff.
	retryMin = 200 * time.Millisecond
	// RetryCap is the longest backoff, and the pace of the probes while
	// the runtime's lists fail.
	RetryCap = 5 * time.Second
)

// podRetries schedules the relists of pods whose relist failed. It is safe
// for concurrent use.
type podRetries struct {
	clock clock.WithDelayedExecution
	// relist asks for a relist of pod uid now.
	relist func(uid string)
	// failing reports whether pod uid's latest inspection failed, and
	// since when the runtime's lists fail (zero while they succeed).
	failing     func(uid string) bool
	listFailing func() time.Time

	mu   sync.Mutex
	pods map[string]*podRetry
	// probed is when a retry last went to a runtime whose lists fail.
	probed  time.Time
	stopped bool
}

// podRetry is the retry of one pod.
type podRetry struct {
	backoff time.Duration
	// last is when its relist last failed.
	last  time.Time
	timer clock.Timer // set while a retry is pending
}

func newPodRetries(
	clk clock.WithDelayedExecution,
	relist func(string),
	failing func(string) bool,
	listFailing func() time.Time,
) *podRetries {
	return &podRetries{
		clock:       clk,
		relist:      relist,
		failing:     failing,
		listFailing: listFailing,
		pods:        make(map[string]*podRetry),
	}
}

// failed schedules a retry of pod uid, whose relist failed at now, unless
// one is pending. A pod that failed again within a RetryCap of the last
// failure waits twice as long as the last time, up to RetryCap.
func (r *podRetries) failed(uid string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.prune(now)
	p := r.pods[uid]
	switch {
	case p == nil:
		p = &podRetry{backoff: retryMin}
		r.pods[uid] = p
	case p.timer != nil:
		return
	default:
		p.backoff = min(2*p.backoff, RetryCap)
	}
	p.last = now
	r.schedule(uid, p, jitter(p.backoff))
}

// prune forgets the pods whose last failure is long past and that wait
// for no retry: their relist succeeded, or they are gone. Callers hold mu.
func (r *podRetries) prune(now time.Time) {
	for uid, p := range r.pods {
		if p.timer == nil && now.Sub(p.last) > 2*RetryCap {
			delete(r.pods, uid)
		}
	}
}

// schedule arms p's timer. Callers hold mu.
func (r *podRetries) schedule(uid string, p *podRetry, after time.Duration) {
	p.timer = r.clock.AfterFunc(after, func() { r.fire(uid, p) })
}

// fire asks for the relist of a pod whose backoff ran out; while the
// runtime's lists fail, only a probe in RetryCap goes.
func (r *podRetries) fire(uid string, p *podRetry) {
	listFailing := !r.listFailing().IsZero()
	failing := r.failing(uid)
	now := r.clock.Now()
	r.mu.Lock()
	if r.stopped || r.pods[uid] != p {
		r.mu.Unlock()
		return
	}
	p.timer = nil
	if wait := RetryCap - now.Sub(r.probed); listFailing && wait > 0 {
		// After the next probe, and spread, so that the pods waiting do
		// not all wake for it.
		r.schedule(uid, p, wait+jitter(wait/10))
		r.mu.Unlock()
		return
	}
	if listFailing {
		r.probed = now
	}
	if !failing {
		// Its lists failed, not its inspection: should this relist fail
		// too, the next retry starts over, and the probe bounds them.
		delete(r.pods, uid)
	}
	r.mu.Unlock()
	r.relist(uid)
}

// stop cancels every pending retry and refuses new ones.
func (r *podRetries) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for uid, p := range r.pods {
		if p.timer != nil {
			p.timer.Stop()
		}
		delete(r.pods, uid)
	}
}

// start accepts retries again after stop.
func (r *podRetries) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = false
}

// pending returns how many pods wait for a retry, for tests of its
// bounds.
func (r *podRetries) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.pods {
		if p.timer != nil {
			n++
		}
	}
	return n
}
