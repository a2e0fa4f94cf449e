package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
)

// Generator is a relisting pod lifecycle event generator: it lists the
// runtime's sandboxes and containers every RelistPeriod, compares each pod
// with what it saw before, inspects the pods that changed into the cache,
// and delivers one event per container state change.
//
// All methods are safe for concurrent use.
type Generator struct {
	rt      runtime.Runtime
	opts    Options
	cache   Cache
	clock   clock.WithDelayedExecution
	log     *slog.Logger
	metrics *metrics.PLEG

	// relistMu serializes global and per-pod relists; it guards the fields
	// below it.
	relistMu sync.Mutex
	records  map[string]*podRecord
	pass     uint64
	listed   []*podRecord
	last     *podRecord // the record group last touched
	// sandboxPods maps sandbox IDs to pod UIDs for containers that lack the
	// pod UID label; built only when one does.
	sandboxPods map[string]string
	invalid     *invalidItems
	// listFailingSince is when global lists started failing; zero while
	// they succeed.
	listFailingSince time.Time

	// relistTime is the start of the last successful global relist.
	relistTime atomic.Pointer[time.Time]

	reinspect  podSet
	requests   *requestQueue
	conditions *watchConditions
	out        *fanout

	// Evented operation: source is nil in generic mode or for a runtime
	// without an event stream.
	source    runtime.EventSource
	stream    *streamState
	hints     *hintBook
	relistNow chan struct{}

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a generator over rt. It does nothing until Start or Relist.
func New(rt runtime.Runtime, opts Options) (*Generator, error) {
	if rt == nil {
		return nil, errors.New("pleg: runtime is nil")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("pleg: %w", err)
	}
	m, err := metrics.NewPLEG(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("pleg: registering metrics: %w", err)
	}
	cache := opts.Cache
	if cache == nil {
		cache = podcache.New()
	}
	g := &Generator{
		rt:          rt,
		opts:        opts,
		cache:       cache,
		clock:       opts.Clock,
		log:         opts.Logger,
		metrics:     m,
		records:     make(map[string]*podRecord),
		sandboxPods: make(map[string]string),
		invalid:     newInvalidItems(opts.Logger, m),
		reinspect:   podSet{set: make(map[string]struct{})},
		requests:    newRequestQueue(),
		conditions:  newWatchConditions(),
		out:         newFanout(opts.ChannelCapacity, m, opts.Logger),
		stream:      newStreamState(),
		hints:       newHintBook(),
		relistNow:   make(chan struct{}, 1),
	}
	if src, ok := rt.(runtime.EventSource); ok && opts.Mode != ModeGeneric {
		g.source = src
	}
	return g, nil
}

// Cache returns the cache the generator writes into.
func (g *Generator) Cache() Cache { return g.cache }

// Start starts relisting: at once, then RelistPeriod after each relist
// ends, and serving RequestRelist in between. Starting a running generator
// does nothing; a stopped one can be started again.
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

// run is the relist loop. A due global relist goes before per-pod
// requests; a request that a global relist started after has been served
// by it and is skipped (one that started at the same instant may have
// listed before the change, so it does not count).
func (g *Generator) run(ctx context.Context, done chan<- struct{}) {
	var watcher sync.WaitGroup
	defer close(done)
	defer watcher.Wait()
	if g.source != nil {
		watcher.Go(func() { g.watchEvents(ctx) })
		// Subscribe first: a change between the first list and the
		// stream's start would otherwise be seen by neither.
		select {
		case <-g.stream.attempted:
		case <-g.clock.After(firstAttemptWait):
		case <-ctx.Done():
		}
	}
	timer := g.clock.NewTimer(0)
	defer timer.Stop()
	relist := func() {
		_ = g.Relist(ctx) // logged and measured inside
		g.updateMode()
		timer.Reset(g.period())
	}
	for ctx.Err() == nil {
		select {
		case <-timer.C():
			relist()
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			relist()
		case <-g.relistNow:
			relist()
		case <-g.requests.ready:
			uid, at, ok := g.requests.pop()
			if ok && !g.lastRelist().After(at) {
				g.relistPod(ctx, uid)
			}
		}
	}
}

// lastRelist returns the start of the last successful global relist.
func (g *Generator) lastRelist() time.Time {
	if t := g.relistTime.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// Healthy reports whether a global relist succeeded recently enough, with
// the kubelet's messages: a generator is unhealthy before its first
// successful relist, and once the start of its last successful relist is
// more than the threshold ago: RelistThreshold, or EventedRelistThreshold
// while the event stream drives. In ModeEvented it is also unhealthy once
// the event stream has been down for RelistThreshold.
func (g *Generator) Healthy() (bool, error) {
	last := g.lastRelist()
	if last.IsZero() {
		return false, errors.New("pleg has yet to be successful")
	}
	if elapsed, threshold := g.clock.Since(last), g.threshold(); elapsed > threshold {
		return false, fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, threshold)
	}
	if g.opts.Mode == ModeEvented && g.source != nil {
		connected, since, err, _ := g.stream.snapshot()
		if down := g.clock.Since(since); !connected && !since.IsZero() && down > g.opts.RelistThreshold {
			return false, fmt.Errorf("the container event stream has been down for %v; threshold is %v: %v", down, g.opts.RelistThreshold, err)
		}
	}
	return true, nil
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

// podSet is a set of pod UIDs safe for concurrent use.
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
