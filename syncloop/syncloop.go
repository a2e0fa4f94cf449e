// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package syncloop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/plegkit/pleg"
)

// The kubelet's syncLoop backoff while runtime errors are reported.
const (
	backoffBase   = 100 * time.Millisecond
	backoffFactor = 2
	backoffMax    = 5 * time.Second
)

// Source is a stream of pod lifecycle events. *pleg.Subscription is one.
//
// Next must return once ctx ends; Run relies on it to stop.
type Source interface {
	Next(ctx context.Context) (pleg.Event, error)
}

// Options configures a Loop.
type Options struct {
	// SyncPod syncs one pod. Required. It is never called concurrently
	// for the same pod.
	SyncPod func(ctx context.Context, podUID string)
	// ContainerDied, if set, is called after SyncPod with each
	// ContainerDied event recorded for the pod since its previous sync, in
	// arrival order, one per container ID. It is the place for the
	// kubelet's cleanUpContainersInPod.
	ContainerDied func(ctx context.Context, ev pleg.Event)
	// HealthChecks gate dispatch, like the checks the kubelet registers
	// with its runtime state: while any fails, no pod is synced. A
	// generator's HealthCheck is one. They run before every dispatch and
	// on every backoff step.
	HealthChecks []pleg.HealthCheck
	// Clock times the backoff. Defaults to clock.RealClock{}.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Loop reads a Source and syncs the pods its events name. Create one with
// New and start it with Run.
type Loop struct {
	src           Source
	syncPod       func(context.Context, string)
	containerDied func(context.Context, pleg.Event)
	checks        []pleg.HealthCheck
	clock         clock.Clock
	log           *slog.Logger

	started atomic.Bool
	// wake tells the dispatcher that pods may have become ready. One
	// buffered slot is enough: the dispatcher rescans everything on wake.
	wake    chan struct{}
	workers sync.WaitGroup

	// mu guards the fields below.
	mu   sync.Mutex
	pods map[string]*podState
	// ready holds the pending pods that have no worker in flight, sorted
	// by seq so that dispatch follows the order pods became pending even
	// when a pod's worker outlives pods that became pending after it.
	ready []*podState
	seq   uint64
}

// podState exists only while a pod is pending or in flight, which is what
// bounds the loop's memory by the number of pods.
type podState struct {
	uid      string
	pending  bool
	inFlight bool
	seq      uint64       // when the pod last became pending
	died     []pleg.Event // at most one per container ID
}

// New returns a loop reading src. It does nothing until Run.
func New(src Source, opts Options) (*Loop, error) {
	if src == nil {
		return nil, errors.New("syncloop: source is nil")
	}
	if opts.SyncPod == nil {
		return nil, errors.New("syncloop: Options.SyncPod is nil")
	}
	for i, hc := range opts.HealthChecks {
		if hc.Name == "" {
			return nil, fmt.Errorf("syncloop: Options.HealthChecks[%d] has no name", i)
		}
		if hc.Healthy == nil {
			return nil, fmt.Errorf("syncloop: health check %q has a nil Healthy", hc.Name)
		}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Loop{
		src:           src,
		syncPod:       opts.SyncPod,
		containerDied: opts.ContainerDied,
		// Copied so that a caller reusing its slice cannot change the
		// checks under a running loop.
		checks: slices.Clone(opts.HealthChecks),
		clock:  opts.Clock,
		log:    opts.Logger,
		wake:   make(chan struct{}, 1),
		pods:   make(map[string]*podState),
	}, nil
}

// RuntimeErrors returns one message per failing health check, in the order
// of the checks, worded as the kubelet words them (and as they appear in
// its NodeReady condition), for example
// "PLEG is not healthy: pleg was last seen active 3m5s ago; threshold is 3m0s".
// It returns nil when every check passes.
func (l *Loop) RuntimeErrors() []string {
	var errs []string
	for _, hc := range l.checks {
		// As in the kubelet, only ok decides; a failing check without an
		// error still counts and prints as <nil>.
		if ok, err := hc.Healthy(); !ok {
			errs = append(errs, fmt.Sprintf("%s is not healthy: %v", hc.Name, err))
		}
	}
	return errs
}

// Run reads the source and dispatches pod syncs until ctx ends or the
// source fails. It returns nil when ctx ends or the source reports
// pleg.ErrSubscriptionClosed, and the source's error otherwise. Either
// way it first waits for the syncs in flight to return; pods still pending
// are not synced. Workers get ctx, so they see it end.
//
// Run may be called only once.
func (l *Loop) Run(ctx context.Context) error {
	if !l.started.CompareAndSwap(false, true) {
		return errors.New("syncloop: Run called more than once")
	}
	readDone := make(chan error, 1)
	go func() { readDone <- l.read(ctx) }()
	err := l.dispatch(ctx, readDone)
	l.workers.Wait()
	return err
}

// read drains the source for as long as Run runs, whatever the health
// checks say: that is what keeps events from piling up in the source.
func (l *Loop) read(ctx context.Context) error {
	for {
		ev, err := l.src.Next(ctx)
		if err != nil {
			switch {
			case ctx.Err() != nil, errors.Is(err, pleg.ErrSubscriptionClosed):
				return nil
			default:
				return fmt.Errorf("syncloop: reading events: %w", err)
			}
		}
		l.record(ev)
	}
}

// record folds ev into the pod's pending state.
func (l *Loop) record(ev pleg.Event) {
	// ContainerRemoved is the one event the kubelet finds not worth a sync:
	// the container's death was reported (and synced) before.
	if ev.Type == pleg.ContainerRemoved {
		return
	}
	l.log.Debug("SyncLoop (PLEG): event for pod", "podUID", ev.PodUID, "namespace", ev.PodNamespace, "name", ev.PodName,
		"type", ev.Type, "containerID", ev.ContainerID)
	l.mu.Lock()
	p := l.pods[ev.PodUID]
	if p == nil {
		p = &podState{uid: ev.PodUID}
		l.pods[ev.PodUID] = p
	}
	if !p.pending {
		p.pending = true
		l.seq++
		p.seq = l.seq
		if !p.inFlight {
			l.ready = append(l.ready, p) // newest seq: stays sorted
		}
	}
	if ev.Type == pleg.ContainerDied && l.containerDied != nil {
		p.addDied(ev)
	}
	l.mu.Unlock()
	l.signal()
}

// addDied keeps one event per container so that a pod held back for long
// cannot grow its list beyond its containers; the latest event wins but
// keeps the first one's place.
func (p *podState) addDied(ev pleg.Event) {
	for i := range p.died {
		if p.died[i].ContainerID == ev.ContainerID {
			p.died[i] = ev
			return
		}
	}
	p.died = append(p.died, ev)
}

func (l *Loop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// dispatch is the kubelet's syncLoop with the health gate moved from
// reading to dispatching.
func (l *Loop) dispatch(ctx context.Context, readDone <-chan error) error {
	backoff := backoffBase
	for {
		if !l.hasReady() {
			select {
			case <-ctx.Done():
				return <-readDone
			case err := <-readDone:
				return err
			case <-l.wake:
			}
			continue
		}
		// Only checked with work at hand: an idle loop has nothing to
		// hold back, and checks are then not polled for nothing.
		if errs := l.RuntimeErrors(); len(errs) > 0 {
			l.log.Error("Skipping pod synchronization", "errors", errs, "backoff", backoff)
			t := l.clock.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return <-readDone
			case err := <-readDone:
				t.Stop()
				return err
			case <-t.C():
			}
			backoff = min(backoff*backoffFactor, backoffMax)
			continue
		}
		backoff = backoffBase
		l.dispatchReady(ctx)
	}
}

func (l *Loop) hasReady() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ready) > 0
}

// dispatchReady starts a worker for every ready pod, oldest first.
func (l *Loop) dispatchReady(ctx context.Context) {
	l.mu.Lock()
	ready := l.ready
	l.ready = nil
	type job struct {
		p    *podState
		died []pleg.Event
	}
	jobs := make([]job, len(ready))
	for i, p := range ready {
		jobs[i] = job{p, p.died}
		p.pending, p.inFlight, p.died = false, true, nil
	}
	l.mu.Unlock()
	for _, j := range jobs {
		l.workers.Go(func() { l.work(ctx, j.p, j.died) })
	}
}

// work syncs one pod, then hands it back: to ready if events came for it
// meanwhile, else out of memory.
func (l *Loop) work(ctx context.Context, p *podState, died []pleg.Event) {
	l.syncPod(ctx, p.uid)
	for _, ev := range died {
		l.containerDied(ctx, ev)
	}
	l.mu.Lock()
	p.inFlight = false
	again := p.pending
	if again {
		i, _ := slices.BinarySearchFunc(l.ready, p.seq, func(q *podState, seq uint64) int {
			return cmp.Compare(q.seq, seq)
		})
		l.ready = slices.Insert(l.ready, i, p)
	} else {
		delete(l.pods, p.uid)
	}
	l.mu.Unlock()
	if again {
		l.signal()
	}
}
