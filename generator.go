// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
)

// The package, file by file, each calling only files below it as a change
// goes through:
//
//	doc.go           the package's documentation
//	generator.go     Generator, New and every exported method; the relist loop (run)
//	options.go       Options, Mode, the Cache interface, defaults
//	relist.go        the relist, global and of one pod: lists, inspections
//	relist_state.go  what the relist lock owns: list items grouped into
//	                 pods, malformed items, each pod's work planned
//	evented.go       the generator's side of the event stream (internal/stream
//	                 supervises it): each event applied or taken as a hint;
//	                 the mode, period and threshold in force
//	payload.go       an event's payload applied at once, or why it is not
//	outbox.go        the one way out of a pod's change: cache, record,
//	                 settle, then the store and delivery, in order
//	subscription.go  Watch's channel and the lossless Subscriptions
//	queues.go        what waits for the loop: the stream's events, relist
//	                 requests, pods to re-inspect; the signal that wakes it
//	hints.go         what events tell that relists cannot see
//	conditions.go    watch conditions
//	health.go        Status, HealthCheck, how relisting fares
//	record.go        what was last seen of each pod, and its change as events
//	store.go         the Store interface, MemoryStore, the reports kept
//	transitions.go   states, the kubelet's transition table, event kinds
//	event.go         Event and EventType
//
// An event's payload, for one, goes down that list: streamSide.Deliver
// (evented.go) queues it (queues.go); the loop's handleEvents reads it,
// takePayload asks the hints whether it may be applied (hints.go) and
// applyPayload (payload.go) moves the pod's record forward and hands the
// change to emit (outbox.go), which writes the cache, advances the record
// (record.go), settles the change with the hints and internal/stream and
// puts it in the outbox; flush keeps it in the store and publishes it to
// the subscribers (subscription.go).

// Generator is a relisting pod lifecycle event generator: it lists the
// runtime's sandboxes and containers every RelistPeriod, compares each pod
// with what it saw before, inspects the pods that changed into the cache,
// and delivers one event per container state change. Where the runtime has
// a container event stream, events ask for relists of their pods in
// between, and slow global relists down to a safety net.
//
// All methods are safe for concurrent use.
type Generator struct {
	// Set by New and read-only after.
	rt      runtime.Runtime
	opts    Options
	cache   Cache
	store   Store
	clock   clock.WithDelayedExecution
	log     *slog.Logger
	metrics *metrics.PLEG
	tracer  tracer
	// stream is nil in generic mode and for a runtime without a stream.
	stream *stream.Supervisor

	// Safe for use from any goroutine: each locks itself.
	health     *health          // how relisting fares: Healthy, Status
	out        *fanout          // delivery to Watch and the subscriptions
	requests   *requestQueue    // pods to relist now: RequestRelist, events
	reinspect  podSet           // pods to inspect at their next relist
	conditions *watchConditions // SetPodWatchCondition
	events     *eventQueue      // from the stream to the relist loop
	relistNow  signal           // a global relist, now

	// relistMu is held by whoever relists: the relist loop, or a caller
	// of Relist. It owns st, the relist state, and makes its holder the
	// one writer of the cache.
	relistMu sync.Mutex
	st       relistState
	// single is the outbox of one pod's change at a time, delivered at
	// once (deliver, a pod's own relist); relisted is a global relist's.
	// Both are owned by relistMu, their slices kept from one to the next.
	single   outbox
	relisted outbox
	// items is where settle lists a report's items for the stream
	// supervisor, which keeps none of them; owned by relistMu.
	items []stream.Item

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a generator over rt. It does nothing until Start or Relist.
func New(rt runtime.Runtime, opts Options) (*Generator, error) {
	if rt == nil {
		return nil, errors.New("runtime is nil")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := metrics.NewPLEG(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	for _, r := range fallbackReasons {
		m.PayloadFallbacks.WithLabelValues(r)
	}
	cache := opts.Cache
	if cache == nil {
		cache = podcache.New()
	}
	store := opts.Store
	if store == nil {
		store = &MemoryStore{}
	}
	restored, err := store.Restore()
	if err != nil {
		return nil, fmt.Errorf("restoring what was reported: %w", err)
	}
	records, err := restoreRecords(restored.Pods)
	if err != nil {
		return nil, fmt.Errorf("restoring what was reported: %w", err)
	}
	g := &Generator{
		rt:         rt,
		opts:       opts,
		cache:      cache,
		store:      store,
		clock:      opts.Clock,
		log:        opts.Logger,
		metrics:    m,
		tracer:     tracer{f: opts.Trace, clock: opts.Clock},
		health:     newHealth(),
		out:        newFanout(opts.ChannelCapacity, m, opts.Logger),
		requests:   newRequestQueue(),
		reinspect:  podSet{set: make(map[string]struct{})},
		conditions: newWatchConditions(),
		events:     newEventQueue(),
		relistNow:  newSignal(),
		st: relistState{
			records:      records,
			catchingUp:   len(restored.Pods) > 0,
			coveredSince: restored.Since,
			invalid:      newInvalidItems(opts.Logger, m),
			hints:        newHintBook(),
		},
	}
	if src, ok := rt.(runtime.EventSource); ok && opts.Mode != ModeGeneric {
		g.stream = g.newStream(src)
	}
	g.st.hints.restore(restored.Removed, opts.Clock.Now())
	g.updateMode()
	return g, nil
}

// Cache returns the cache the generator writes into.
func (g *Generator) Cache() Cache { return g.cache }

// Start starts relisting: at once (once the event stream is up, and for a
// generator catching up from a Store, once the runtime's backlog is in),
// then RelistPeriod after each relist ends, and serving RequestRelist and
// the event stream in between.
// Starting a running generator does nothing; a stopped one can be started
// again.
func (g *Generator) Start() {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	if g.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan struct{})
	go g.run(ctx, g.done)
}

// Stop stops relisting, cancels a relist in flight and waits for it to
// return. Stopping a stopped generator does nothing. Subscriptions stay
// open.
func (g *Generator) Stop() {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	if g.cancel == nil {
		return
	}
	g.cancel()
	<-g.done
	g.cancel, g.done = nil, nil
}

// Relist lists the runtime once and reconciles every pod: it delivers the
// events of the pods whose containers changed, after writing their fresh
// status to the cache, re-inspects the pods whose last inspection failed or
// that were asked for, and then stamps the cache's global time. It returns
// the list error, the only one that fails a relist; a pod whose inspection
// fails is retried at the next relist.
func (g *Generator) Relist(ctx context.Context) error {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	return g.relist(ctx)
}

// Healthy reports whether a global relist succeeded recently enough, with
// the kubelet's messages: a generator is unhealthy before its first
// successful relist, and once the start of its last successful relist is
// more than the threshold ago: RelistThreshold, or EventedRelistThreshold
// while the event stream drives. In ModeEvented it is also unhealthy once
// the event stream has been down for RelistThreshold.
func (g *Generator) Healthy() (bool, error) {
	last := g.health.last()
	if last.IsZero() {
		return false, errors.New("pleg has yet to be successful")
	}
	if elapsed, threshold := g.clock.Since(last), g.threshold(); elapsed > threshold {
		return false, fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, threshold)
	}
	if g.opts.Mode == ModeEvented && g.stream != nil {
		st := g.stream.State()
		if down := g.clock.Since(st.Since); !st.Connected && !st.Since.IsZero() && down > g.opts.RelistThreshold {
			return false, fmt.Errorf("the container event stream has been down for %v; threshold is %v: %w",
				down, g.opts.RelistThreshold, st.Err)
		}
	}
	return true, nil
}

// HealthCheck returns the generator's health check, named "PLEG" as the
// kubelet names it.
func (g *Generator) HealthCheck() HealthCheck {
	return HealthCheck{Name: "PLEG", Healthy: g.Healthy}
}

// Status returns how the generator learns of changes at the moment and how
// its relisting fares: what a health page or a report to the cluster
// shows. It never calls the runtime.
func (g *Generator) Status() Status {
	s := Status{Mode: g.opts.Mode, RelistPeriod: g.period(), RelistThreshold: g.threshold()}
	switch {
	case g.stream != nil:
		st := g.stream.State()
		s.StreamConnected, s.StreamSince, s.StreamError, s.NoStream = st.Connected, st.Since, st.Err, st.Unsupported
		s.Evented = st.Holding
		for _, k := range g.stream.UntoldRemovals() {
			s.UntoldRemovals = append(s.UntoldRemovals, k.String())
		}
	case g.opts.Mode != ModeGeneric:
		s.NoStream = true // the runtime is no EventSource
	}
	g.health.fill(&s)
	return s
}

// Watch returns the kubelet-compatible event channel, of capacity
// ChannelCapacity. Events are sent without blocking: when the channel is
// full they are dropped and counted in kubelet_pleg_discard_events, as in
// the kubelet, and never sent again. Nothing is sent before the first call
// to Watch. Use Subscribe for delivery that loses nothing.
func (g *Generator) Watch() <-chan Event { return g.out.watchChannel() }

// Subscribe returns a new lossless subscription to the generator's events.
// Close it when done.
func (g *Generator) Subscribe() *Subscription { return g.out.subscribe() }

// RequestRelist asks for pod uid to be listed and reconciled now, ahead of
// the next global relist. Requests for a pod coalesce until served and are
// never dropped; one that a global relist has covered meanwhile is skipped.
func (g *Generator) RequestRelist(uid string) {
	_ = g.requests.add(uid, g.clock.Now())
}

// RequestReinspect asks for pod uid to be inspected again at its next
// relist, global or per-pod, even if no container changed. The
// re-inspection yields PodSync when no container event does.
func (g *Generator) RequestReinspect(uid string) {
	g.reinspect.add(uid)
}

// SetPodWatchCondition sets the condition called key on pod uid, replacing
// any condition of that name. Until it holds, the pod is inspected at every
// relist, whether or not a container changed; the relist at which it holds
// removes it and delivers ConditionMet for the pod (one event however many
// conditions held). A condition replaced while being evaluated is kept.
// Conditions of a pod that is no longer listed are dropped. Use it to wait
// for changes the runtime does not show as container state changes, such
// as an in-place resize.
func (g *Generator) SetPodWatchCondition(uid, key string, cond WatchCondition) {
	g.conditions.set(uid, key, cond)
}

// run is the relist loop. Events from the stream go first, since they are
// cheap and late events are what evented mode exists to avoid; then a due
// global relist; then per-pod requests. A request that a global relist
// started after has been served by it and is skipped (one that started at
// the same instant may have listed before the change, so it does not
// count).
func (g *Generator) run(ctx context.Context, done chan<- struct{}) {
	var watcher sync.WaitGroup
	defer close(done)
	defer watcher.Wait()
	locked := func(f func()) {
		g.relistMu.Lock()
		defer g.relistMu.Unlock()
		f()
	}
	if g.stream != nil {
		watcher.Go(func() { g.stream.Run(ctx) })
		g.awaitStream(ctx)
	}
	timer := g.clock.NewTimer(0)
	defer timer.Stop()
	relist := func() {
		locked(func() { _ = g.relist(ctx) }) // logged and measured inside
		g.updateMode()
		timer.Reset(g.period())
	}
	// A pod's relist waits on the runtime beside the loop, one pod at a
	// time, so that other pods' events are not held up behind it (see
	// listPod and podListed); nothing else is started until it is done.
	var podListed chan podList
	var podInspected chan *podInspection
	defer locked(func() { g.st.listing = "" })
	for ctx.Err() == nil {
		select {
		case <-g.events.ready:
			locked(g.handleEvents)
			continue
		default:
		}
		timerC, relistNow, requests := timer.C(), g.relistNow, g.requests.ready
		if podListed != nil || podInspected != nil {
			timerC, relistNow, requests = nil, nil, nil
		}
		select {
		case <-timerC:
			relist()
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-g.events.ready:
			locked(g.handleEvents)
		case l := <-podListed:
			podListed = nil
			var pi *podInspection
			locked(func() { pi = g.podListed(ctx, l) })
			if pi != nil {
				inspected := make(chan *podInspection, 1)
				watcher.Go(func() {
					// Like an inspection worker, it touches nothing but pi.
					pi.in = g.inspectWork(ctx, &pi.w)
					inspected <- pi
				})
				podInspected = inspected
			}
		case pi := <-podInspected:
			podInspected = nil
			locked(func() { g.podInspected(ctx, pi) })
		case <-timerC:
			relist()
		case <-relistNow:
			relist()
		case <-requests:
			uid, at, ok := g.requests.pop()
			if ok && !g.health.last().After(at) {
				locked(func() { g.st.listing = uid })
				listed := make(chan podList, 1)
				watcher.Go(func() { listed <- g.listPod(ctx, uid) })
				podListed = listed
			}
		}
	}
}

// awaitStream waits for what the first relist must come after: the
// stream's first attempt to connect, since a change between the first list
// and the stream's start would otherwise be seen by neither; and, for a
// generator caught up from a Store, the runtime's backlog, which may tell
// what its lists no longer can.
func (g *Generator) awaitStream(ctx context.Context) {
	g.stream.AwaitAttempt(ctx)
	g.relistMu.Lock()
	catchingUp := g.st.catchingUp && !g.st.coveredSince.IsZero()
	g.relistMu.Unlock()
	if catchingUp {
		g.stream.AwaitBacklog(ctx, stream.BacklogMaybe)
	}
}
