// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
)

const (
	// Hold is how long the stream must stay up before it drives;
	// until then global relists keep the normal period.
	Hold = 5 * time.Second
	// untoldRemovalsToWatch is how many removals of a kind, found by
	// relists and not told by the connected stream, make the removal watch
	// (removals.go) look for that kind, whatever the runtime is known to
	// do. It is a few rather than one because a single event can be lost:
	// containerd 1.7 loses one to a client that closes its stream.
	untoldRemovalsToWatch = 3
	// UntoldGrace is how long a removal found by a relist waits for its
	// DELETED before it counts as untold, since the event may have been on
	// its way as the relist listed: containerd sends a pod's container
	// DELETEDs, then its sandbox's, and the relist one of them asks for
	// may list in between.
	UntoldGrace = 5 * time.Second
	// Reconnects back off from reconnectMin to reconnectMax, with jitter.
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 30 * time.Second
	// firstAttemptWait bounds how long the first relist waits for the
	// stream, which it waits for so that no change falls between the list
	// and the stream.
	firstAttemptWait = 5 * time.Second
)

// Supervisor keeps the runtime's container event stream open for as
// long as its context lasts: it hands every event on at once, so that the
// runtime never waits on us (a slow reader stalls containerd's own
// handlers), and reconnects with capped, jittered backoff whenever the
// stream ends. Unlike the kubelet, it never gives up. Its state is read
// from any goroutine.
type Supervisor struct {
	source        runtime.EventSource
	gen           Generator
	required      bool
	noStreamRetry time.Duration
	clock         clock.WithDelayedExecution
	log           *slog.Logger
	metrics       *metrics.PLEG
	// watch finds the removals the stream does not tell; it runs as long
	// as the supervisor.
	watch *removalWatch
	// retries asks again for the relists of pods that failed, while the
	// supervisor runs.
	retries *podRetries

	// attempted is closed once the first attempt to connect is over.
	attempted     chan struct{}
	attemptedOnce sync.Once
	// retry cuts a backoff wait short.
	retry chan struct{}
	// backlog follows each new stream until what the runtime kept for
	// it is delivered.
	backlog *backlogWatch

	mu          sync.Mutex
	connected   bool
	since       time.Time // up since, or down since
	err         error     // what ended it last
	unsupported bool      // the runtime has no stream
	// removals is what the connected stream tells of each kind of removal.
	removals [NumRemovalKinds]removalCoverage
	// pendingUntold holds, by ID, the removals relists found untold and
	// still within UntoldGrace. told holds when a DELETED came for an ID,
	// for as long, because a relist may settle a removal whose DELETED
	// came while it inspected the pod. Each judge prunes both to the last
	// UntoldGrace.
	pendingUntold map[string]untoldRemoval
	told          map[string]time.Time
}

// removalCoverage is what a stream is found to tell of one kind of
// removal, since it connected.
type removalCoverage struct {
	// known is what the runtime's adapter knows of it, if it says.
	known runtime.Availability
	// told is set once a DELETED event of the kind came.
	told bool
	// untold counts the removals relists found that the stream, connected
	// meanwhile, did not tell, within UntoldGrace.
	untold int
}

// untoldRemoval is a removal a relist found, whose DELETED may still come.
type untoldRemoval struct {
	kind RemovalKind
	// sandbox tells a sandbox from the containers removed with it.
	sandbox bool
	found   time.Time
}

// tells reports whether the stream is taken to tell removals of the kind:
// removals found untold outweigh a DELETED that came, which outweighs
// what the adapter knows. Of a runtime that is not known, a stream is not
// taken to tell them until it does.
func (c removalCoverage) tells() bool {
	switch {
	case c.untold >= untoldRemovalsToWatch:
		return false
	case c.told:
		return true
	default:
		return c.known == runtime.Supported
	}
}

// newSupervisor returns a supervisor without removal watch and retries.
func newSupervisor(src runtime.EventSource, g Generator, cfg Config) *Supervisor {
	return &Supervisor{
		source:        src,
		gen:           g,
		required:      cfg.Required,
		noStreamRetry: cfg.NoStreamRetry,
		clock:         cfg.Clock,
		log:           cfg.Logger,
		metrics:       cfg.Metrics,
		attempted:     make(chan struct{}),
		retry:         make(chan struct{}, 1),
		backlog:       newBacklogWatch(cfg.Clock),
	}
}

// up records that stream connected at at.
func (s *Supervisor) up(at time.Time, stream runtime.EventStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connected, s.since, s.err, s.unsupported = true, at, nil, false
	var known [NumRemovalKinds]runtime.Availability
	if r, ok := stream.(runtime.RemovalReporter); ok {
		known[ContainerRemovals], known[PodRemovals] = r.RemovalEvents()
	}
	for k := range s.removals {
		s.removals[k] = removalCoverage{known: known[k]}
	}
	clear(s.pendingUntold)
	clear(s.told)
}

func (s *Supervisor) down(at time.Time, err error, unsupported bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connected || s.since.IsZero() {
		s.since = at
	}
	s.connected, s.err, s.unsupported = false, err, unsupported
}

// AwaitAttempt returns once the first attempt to connect is over, or
// firstAttemptWait has passed: the first relist waits for it, since a
// change between its lists and the stream's start would be seen by
// neither.
func (s *Supervisor) AwaitAttempt(ctx context.Context) {
	select {
	case <-s.attempted:
	case <-s.clock.After(firstAttemptWait):
	case <-ctx.Done():
	}
}

func (s *Supervisor) attemptDone() { s.attemptedOnce.Do(func() { close(s.attempted) }) }

// holding reports whether the stream has been up for Hold at now.
func (s *Supervisor) holding(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected && now.Sub(s.since) >= Hold
}

// State is the stream's state at one instant.
type State struct {
	// Connected tells that the stream is up; Holding, that it has been up
	// for Hold, and drives.
	Connected, Holding bool
	// Since is when the stream went up, or down; zero before the first
	// attempt.
	Since time.Time
	// Err is what ended the stream last.
	Err error
	// Unsupported tells that the runtime has no stream.
	Unsupported bool
}

// State returns the stream's state now.
func (s *Supervisor) State() State {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{
		Connected:   s.connected,
		Holding:     s.connected && now.Sub(s.since) >= Hold,
		Since:       s.since,
		Err:         s.err,
		Unsupported: s.unsupported,
	}
}

// Removals are what a relist found removed of one pod that no event told:
// its sandboxes, and its containers. Containers removed with a sandbox
// count as its pod's removal, as RemovePodSandbox removes them.
type Removals struct {
	Sandboxes, Containers []string
}

// kind is the kind of removal r is.
func (r Removals) kind() RemovalKind {
	if len(r.Sandboxes) > 0 {
		return PodRemovals
	}
	return ContainerRemovals
}

// Reported takes what the generator reported of a pod: the removal watch
// learns which of its items may be removed unseen, and the removals a
// relist found untold count against the stream.
func (s *Supervisor) Reported(r Report) {
	s.watch.settled(r.UID, r.Items, r.Observed)
	s.removalsUntold(r.Untold, r.LastObserved, s.clock.Now())
}

// removalsUntold records the removals r a relist found at now that no
// event told, of items last observed at since: they count only if the
// stream was connected since before, and their DELETED does not come
// within UntoldGrace.
func (s *Supervisor) removalsUntold(r Removals, since, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(r.Sandboxes)+len(r.Containers) == 0 || !s.connected || since.IsZero() || !s.since.Before(since) {
		return
	}
	if s.pendingUntold == nil {
		s.pendingUntold = make(map[string]untoldRemoval)
	}
	k := r.kind()
	for i, ids := range [][]string{r.Sandboxes, r.Containers} {
		for _, id := range ids {
			if _, ok := s.told[id]; !ok {
				s.pendingUntold[id] = untoldRemoval{kind: k, sandbox: i == 0, found: now}
			}
		}
	}
}

// RemovalTold records that a DELETED event came for id, a removal of kind
// k if known: a removal a relist found untold just before, or finds just
// after, is told after all. Only a sandbox's DELETED tells that pod
// removals are told: a container found removed with its pod may have been
// removed on its own just before, which CRI-O tells.
func (s *Supervisor) RemovalTold(id string, k RemovalKind, known bool) {
	s.removalTold(id, k, known, s.clock.Now())
}

// removalTold is RemovalTold at now.
func (s *Supervisor) removalTold(id string, k RemovalKind, known bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told == nil {
		s.told = make(map[string]time.Time)
	}
	s.told[id] = now
	if u, ok := s.pendingUntold[id]; ok {
		k, known = u.kind, true
		if !u.sandbox {
			k = ContainerRemovals
		}
		delete(s.pendingUntold, id)
	}
	if known {
		s.removals[k].told = true
	}
}

// judge counts as untold the removals whose DELETED did not come within
// UntoldGrace, and reports the kinds that turned untold. Callers hold mu.
func (s *Supervisor) judge(now time.Time) (turned []RemovalKind) {
	for id, at := range s.told {
		if now.Sub(at) >= UntoldGrace {
			delete(s.told, id)
		}
	}
	for id, u := range s.pendingUntold {
		if now.Sub(u.found) < UntoldGrace {
			continue
		}
		delete(s.pendingUntold, id)
		c := &s.removals[u.kind]
		before := c.tells()
		c.untold++
		if before && !c.tells() {
			turned = append(turned, u.kind)
		}
	}
	return turned
}

// tellsRemovals reports whether the stream is taken to tell removals of
// kind k, as of now.
func (s *Supervisor) tellsRemovals(k RemovalKind, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.judgeAndSay(now)
	return s.removals[k].tells()
}

// judgeAndSay is judge, saying when a kind turns untold. Callers hold mu.
func (s *Supervisor) judgeAndSay(now time.Time) {
	for _, turned := range s.judge(now) {
		s.log.Info("The container event stream does not tell these removals; listing exited items every second to find them",
			"kind", turned.String(), "period", RemovalPollPeriod)
	}
}

// UntoldRemovals returns the kinds of removal the stream is not taken to
// tell.
func (s *Supervisor) UntoldRemovals() []RemovalKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.judgeAndSay(s.clock.Now())
	var out []RemovalKind
	for k, c := range s.removals {
		if !c.tells() {
			out = append(out, RemovalKind(k))
		}
	}
	return out
}

// RetryNow cuts a wait before the next attempt short: the runtime answers
// again, so its stream very likely does too. Backoff grown while it was
// down would otherwise keep the stream down long after.
func (s *Supervisor) RetryNow() {
	select {
	case s.retry <- struct{}{}:
	default:
	}
}

// Run keeps the stream open until ctx ends.
func (s *Supervisor) Run(ctx context.Context) {
	defer s.attemptDone()
	if s.watch != nil {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { s.watch.run(ctx) })
	}
	if s.retries != nil {
		s.retries.start()
		defer s.retries.stop()
	}
	delay := time.Duration(0)
	backoff := reconnectMin
	for {
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.clock.After(delay):
			case <-s.retry:
				backoff = reconnectMin
			}
			s.metrics.StreamReconnects.Inc()
		}
		// A retry asked for before this attempt is served by it.
		select {
		case <-s.retry:
		default:
		}
		start := s.clock.Now()
		stream, err := s.source.GetContainerEvents(ctx)
		opened := err == nil
		if opened {
			s.metrics.EventedConnectionSuccess.Inc()
			s.metrics.StreamConnected.Set(1)
			s.backlog.connected()
			s.up(start, stream)
			s.attemptDone()
			s.log.Info("Container event stream connected")
			s.gen.StreamChanged(Connected)
			err = s.drain(ctx, stream, start)
		}
		s.attemptDone()
		if ctx.Err() != nil {
			s.down(s.clock.Now(), ctx.Err(), false)
			s.metrics.StreamConnected.Set(0)
			return
		}
		held := opened && s.clock.Since(start) >= Hold
		// CRI-O with events off closes at once; a runtime without the RPC
		// answers Unimplemented: both mean there is no stream.
		unsupported := status.Code(err) == codes.Unimplemented || (opened && !held && errors.Is(err, io.EOF))
		s.metrics.StreamConnected.Set(0)
		s.metrics.EventedConnectionErrors.Inc()
		s.down(s.clock.Now(), err, unsupported)
		change := Failed
		if opened {
			change = Ended
		}
		s.gen.StreamChanged(change)
		switch {
		case unsupported && !s.required:
			s.log.Info("The runtime has no container event stream; relisting alone", "err", err, "retryIn", s.noStreamRetry)
			delay = s.noStreamRetry
		case held:
			s.log.Warn("Container event stream ended; reconnecting", "err", err, "connectedFor", s.clock.Since(start))
			delay, backoff = 0, reconnectMin
		default:
			s.log.Warn("Container event stream failed; relisting every period until it is back", "err", err, "retryIn", backoff)
			delay = jitter(backoff)
			backoff = min(2*backoff, reconnectMax)
		}
	}
}

// drain reads the stream until it ends.
func (s *Supervisor) drain(ctx context.Context, stream runtime.EventStream, connectedAt time.Time) error {
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		s.gen.Deliver(ev, connectedAt)
		s.backlog.saw(ev, connectedAt)
	}
}

// Expect is what a caller of AwaitBacklog knows of the runtime's backlog.
type Expect uint8

const (
	// BacklogMaybe tells that the runtime may keep none: a quiet since
	// the stream connected ends the wait.
	BacklogMaybe Expect = iota
	// BacklogDue tells that the runtime has a backlog to send (a
	// container last reported was removed meanwhile). The quiet since
	// the stream connected does not end the wait, since a loaded runtime
	// may begin sending later than that; only the quiet after an event
	// of the backlog, or firstAttemptWait, does.
	BacklogDue
)

// AwaitBacklog returns once the connected stream has delivered what the
// runtime kept for it (see backlog.go), at once if none is connected.
func (s *Supervisor) AwaitBacklog(ctx context.Context, e Expect) {
	s.backlog.wait(ctx, s.connectedSince, e == BacklogDue)
}

func (s *Supervisor) connectedSince() (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected, s.since
}

// jitter spreads d by ±20%, so that the nodes of a cluster whose runtimes
// restarted together do not reconnect together.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// RelistFailed asks for another relist of pod uid, whose relist failed,
// after a backoff (retries.go).
func (s *Supervisor) RelistFailed(uid string) { s.retries.failed(uid, s.clock.Now()) }

// Sizes is how much the supervisor holds, for tests of its bounds.
type Sizes struct {
	// Retries counts the pods waiting for a retry.
	Retries int
	// WatchedContainers and WatchedPods count the items the removal
	// watch knows of each kind.
	WatchedContainers, WatchedPods int
}

// Sizes returns how much the supervisor holds.
func (s *Supervisor) Sizes() Sizes {
	var z Sizes
	z.Retries = s.retries.pending()
	z.WatchedContainers, z.WatchedPods = s.watch.size()
	return z
}
