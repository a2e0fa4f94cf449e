// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
)

// conditionWriter keeps the node's condition equal to the latest verdict.
// The reporter's loop hands it verdicts (set) and never waits for it; its
// own goroutine (run) writes them with a strategic merge patch on
// nodes/status, which leaves the kubelet's conditions alone: a change at
// the node's turn in the spread, at most one write per minInterval, a
// failed one retried with a capped backoff (the latest verdict, not the
// failed one), and a heartbeat when nothing changes.
type conditionWriter struct {
	nodes       corev1client.NodeInterface
	name        string
	clock       clock.WithTicker
	log         *slog.Logger
	count       func(result string)
	minInterval time.Duration
	maxRetry    time.Duration
	heartbeat   time.Duration
	spread      spreader

	// onStored, if set, is told the condition the API server holds, each
	// time the writer learns it.
	onStored func(*corev1.NodeCondition)

	// notify wakes run when the verdict changes.
	notify chan struct{}

	mu sync.Mutex
	// want is the latest verdict and since when its status holds; wanted
	// is false before the first. pending tells it is not written yet, and
	// notBefore when it may be: the node's turn in the spread after the
	// verdicts started to differ from what was written.
	want      verdict
	since     time.Time
	wanted    bool
	pending   bool
	notBefore time.Time

	// Owned by run.
	stored      *corev1.NodeCondition // the condition the API server holds
	known       bool                  // stored was read from the API server
	beatDue     time.Time             // when stored needs a heartbeat
	lastAttempt time.Time
	backoff     wait.Backoff
	failing     bool      // the last attempt failed
	retryAt     time.Time // not before, while failing
}

func newConditionWriter(nodes corev1client.NodeInterface, name string, clk clock.WithTicker, log *slog.Logger,
	count func(string), minInterval, maxRetry, heartbeat time.Duration, spread spreader) *conditionWriter {
	w := &conditionWriter{
		nodes: nodes, name: name, clock: clk, log: log, count: count,
		minInterval: minInterval, maxRetry: maxRetry, heartbeat: heartbeat, spread: spread,
		notify: make(chan struct{}, 1),
	}
	w.resetBackoff()
	return w
}

// set hands the writer the verdict observed at now. A verdict that
// replaces one not yet written is counted as dropped: the API server
// never saw it.
func (w *conditionWriter) set(v verdict, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wanted && v == w.want {
		return
	}
	if w.pending {
		w.count(resultDropped)
	} else {
		w.notBefore = w.spread.turn(now)
	}
	if !w.wanted || v.status() != w.want.status() {
		w.since = now
	}
	w.want, w.wanted, w.pending = v, true, true
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *conditionWriter) latest() (v verdict, since, notBefore time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.want, w.since, w.notBefore, w.wanted
}

// written marks v as on the API server, unless a newer verdict came.
func (w *conditionWriter) written(v verdict) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.want == v {
		w.pending = false
	}
}

// run writes verdicts until ctx ends.
func (w *conditionWriter) run(ctx context.Context) {
	var next time.Time
	for {
		var wake <-chan time.Time
		var timer clock.Timer
		if !next.IsZero() {
			timer = w.clock.NewTimer(max(next.Sub(w.clock.Now()), 0))
			wake = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-w.notify:
		case <-wake:
		}
		if timer != nil {
			timer.Stop()
		}
		next = w.step(ctx)
	}
}

// step makes at most one call to the API server and returns when to try
// again (zero: when the verdict changes).
func (w *conditionWriter) step(ctx context.Context) time.Time {
	now := w.clock.Now()
	if earliest := w.lastAttempt.Add(w.minInterval); !w.lastAttempt.IsZero() && now.Before(earliest) {
		return earliest
	}
	if w.failing && now.Before(w.retryAt) {
		return w.retryAt // a new verdict waits for the backoff too
	}
	want, since, notBefore, ok := w.latest()
	if !ok {
		return time.Time{}
	}
	if now.Before(notBefore) {
		return notBefore // the change waits for the node's turn
	}
	if !w.known {
		// Read the condition pleg wrote before a restart, so that its
		// lastTransitionTime stays true when its status has not changed.
		w.lastAttempt = now
		node, err := w.nodes.Get(ctx, w.name, metav1.GetOptions{})
		switch {
		case apierrors.IsForbidden(err):
			// A role without get on nodes: write anyway, the transition
			// time counted from pleg's start.
			w.log.Warn("Cannot read the node; its PLEGDegraded lastTransitionTime starts from now", "node", w.name, "err", err)
			w.known = true
		case err != nil:
			return w.failed(ctx, now, "reading the node", err)
		default:
			w.stored, w.known = find(node), true
			if w.stored != nil {
				// A restart: the heartbeat comes at a random point, as
				// after a change, so that a fleet restarted at once does
				// not beat in step.
				w.beatDue = w.stored.LastHeartbeatTime.Add(w.spread.heartbeat(w.heartbeat))
			}
		}
	}
	if w.stored != nil && same(w.stored, want) && now.Before(w.beatDue) {
		w.store(w.stored)
		w.written(want)
		return w.beatDue
	}

	w.lastAttempt = now
	sent, node, err := w.patch(ctx, want, since, now)
	if err != nil {
		if apierrors.IsNotFound(err) {
			w.known = false // read it again once it is back
		}
		return w.failed(ctx, now, "patching the node's status", err)
	}
	w.count(resultWritten)
	if w.failing {
		w.log.Info("Writing to the Kubernetes API works again", "node", w.name)
		w.failing = false
	}
	w.resetBackoff()
	// After a change the next heartbeat comes at a random point of the
	// period's second half; after a heartbeat, a period later.
	if w.stored != nil && same(w.stored, want) {
		w.beatDue = now.Add(w.heartbeat)
	} else {
		w.beatDue = now.Add(w.spread.heartbeat(w.heartbeat))
	}
	if got := find(node); got != nil {
		w.store(got)
	} else {
		w.store(&sent)
	}
	w.written(want)
	return w.beatDue
}

// store records c as the condition the API server holds.
func (w *conditionWriter) store(c *corev1.NodeCondition) {
	w.stored = c
	if w.onStored != nil {
		w.onStored(c)
	}
}

// patch writes v as the condition, its status holding since since, and
// returns the condition sent and the node as the API server answered.
// The kubelet's conditions are left alone: a strategic merge patch merges
// conditions by type.
func (w *conditionWriter) patch(
	ctx context.Context,
	v verdict,
	since, now time.Time,
) (corev1.NodeCondition, *corev1.Node, error) {
	cond := corev1.NodeCondition{
		Type:               ConditionType,
		Status:             v.status(),
		Reason:             v.reason,
		Message:            v.message,
		LastHeartbeatTime:  metav1.NewTime(now),
		LastTransitionTime: metav1.NewTime(since),
	}
	if w.stored != nil && w.stored.Status == cond.Status {
		cond.LastTransitionTime = w.stored.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return cond, nil, err
	}
	node, err := w.nodes.Patch(
		ctx,
		w.name,
		types.StrategicMergePatchType,
		patch,
		metav1.PatchOptions{FieldManager: fieldManager},
		"status",
	)
	return cond, node, err
}

// stop writes the condition as Unknown, once, within ctx: pleg stops, and
// nothing will refresh what it said last. Call it after run has returned.
func (w *conditionWriter) stop(ctx context.Context, now time.Time) {
	sent, _, err := w.patch(ctx, stopped(now), now, now)
	if err != nil {
		w.count(resultDropped)
		w.log.Warn("Cannot set pleg's node condition to Unknown as it stops", "node", w.name, "err", err)
		return
	}
	w.count(resultWritten)
	if w.onStored != nil {
		w.onStored(&sent)
	}
}

// failed counts a failed attempt and returns when to retry.
func (w *conditionWriter) failed(ctx context.Context, now time.Time, what string, err error) time.Time {
	if ctx.Err() != nil {
		return time.Time{}
	}
	w.count(resultRetried)
	if !w.failing {
		// Once per outage: the counter tells the rest.
		w.log.Warn("Cannot write pleg's node condition; retrying", "node", w.name, "while", what, "err", err)
		w.failing = true
	}
	w.retryAt = now.Add(w.backoff.Step())
	return w.retryAt
}

func (w *conditionWriter) resetBackoff() {
	w.backoff = wait.Backoff{Duration: w.minInterval, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: w.maxRetry}
}

// find returns pleg's condition on node, or nil.
func find(node *corev1.Node) *corev1.NodeCondition {
	if node == nil {
		return nil
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == ConditionType {
			c := node.Status.Conditions[i]
			return &c
		}
	}
	return nil
}

func same(c *corev1.NodeCondition, v verdict) bool {
	return c.Status == v.status() && c.Reason == v.reason && c.Message == v.message
}
