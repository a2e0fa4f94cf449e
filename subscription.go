// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plegkit/pleg/metrics"
)

// ErrSubscriptionClosed is returned by Next once the subscription is closed.
var ErrSubscriptionClosed = errors.New("subscription closed")

// fanout delivers each pod change to the Watch channel and to every
// subscription. It never blocks the generator.
type fanout struct {
	metrics *metrics.PLEG
	log     *slog.Logger

	watch    chan Event
	watching atomic.Bool

	mu   sync.RWMutex
	subs map[*Subscription]struct{}
}

func newFanout(capacity int, m *metrics.PLEG, log *slog.Logger) *fanout {
	// Every type shows from the start, so that a rate of one is 0 rather
	// than nothing.
	for _, typ := range []EventType{ContainerStarted, ContainerDied, ContainerRemoved, PodSync, ConditionMet} {
		m.Events.WithLabelValues(string(typ))
	}
	return &fanout{metrics: m, log: log, watch: make(chan Event, capacity), subs: make(map[*Subscription]struct{})}
}

func (f *fanout) watchChannel() <-chan Event {
	f.watching.Store(true)
	return f.watch
}

func (f *fanout) subscribe() *Subscription {
	s := &Subscription{
		fanout:  f,
		pending: make(map[string]*pendingPod),
		wake:    newSignal(),
		closed:  make(chan struct{}),
	}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s
}

func (f *fanout) unsubscribe(s *Subscription) {
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
}

// publish delivers c, whose events are events, and counts them in
// pleg_events_total.
func (f *fanout) publish(c *podChange, events []Event) {
	for _, ev := range events {
		f.metrics.Events.WithLabelValues(string(ev.Type)).Inc()
	}
	if f.watching.Load() {
		for _, ev := range events {
			select {
			case f.watch <- ev:
			default:
				f.metrics.DiscardEvents.Inc()
				f.log.Error("Event channel is full, discard this relist() cycle event", "pod", ev.PodUID, "type", ev.Type,
					"containerID", ev.ContainerID)
			}
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for s := range f.subs {
		s.add(c)
	}
}

// Subscription is a lossless stream of the generator's events, queued per
// pod so that it never blocks the generator.
//
// A subscriber that keeps up receives every event in order. One that falls
// behind receives each pod's pending events together, each container's in
// order, and misses none: a container's life only goes forward, so it has
// at most three events to tell. Two cases coalesce into fewer events: a
// container whose state went back or sideways (through unknown) yields the
// kubelet's one transition from what the subscriber last learned to the
// latest; past maxEndedPending containers of one pod ended unseen, the
// oldest fold away (started and removed unseen becomes nothing). What is
// pending is bounded by the number of pods and containers, not events.
type Subscription struct {
	fanout *fanout

	mu      sync.Mutex
	pending map[string]*pendingPod
	queue   []*pendingPod // pods in the order their first pending event came
	batch   []Event       // events of the pod being delivered

	wake      signal
	closed    chan struct{}
	closeOnce sync.Once
}

// pendingPod is what a subscription has yet to deliver of one pod.
type pendingPod struct {
	podRef
	slots []slot
	podEvents
	// changes counts the changes merged, to tell a change's own
	// transitions from those of earlier ones.
	changes int
}

// slot is one container's pending transitions. Transitions of one change
// stay as they are: a change may tell a whole life, as when the event
// stream reports a container that came and went between two relists.
// Transitions of a later change fold what is pending into the one
// transition from the state the subscriber knows to the latest.
type slot struct {
	ts       []transition // ts[0].old: as the subscriber knows it
	change   int          // the change that last touched the slot
	observed time.Time
}

// Next returns the next event, waiting for one until ctx ends or the
// subscription is closed.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if ev, ok := s.nextLocked(); ok {
			s.mu.Unlock()
			return ev, nil
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.closed:
			return Event{}, ErrSubscriptionClosed
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// TryNext returns the next event if one is pending, without waiting.
func (s *Subscription) TryNext() (Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextLocked()
}

func (s *Subscription) nextLocked() (Event, bool) {
	for len(s.batch) == 0 {
		if len(s.queue) == 0 {
			return Event{}, false
		}
		p := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		delete(s.pending, p.uid)
		s.batch = p.events()
	}
	ev := s.batch[0]
	s.batch = s.batch[1:]
	return ev, true
}

// Pending returns the number of pods with events waiting to be delivered.
func (s *Subscription) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Close ends the subscription: Next returns ErrSubscriptionClosed and
// nothing more is queued.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() {
		s.fanout.unsubscribe(s)
		close(s.closed)
		s.mu.Lock()
		s.pending, s.queue, s.batch = nil, nil, nil
		s.mu.Unlock()
	})
}

func (s *Subscription) add(c *podChange) {
	s.mu.Lock()
	if s.pending == nil { // closed
		s.mu.Unlock()
		return
	}
	p, ok := s.pending[c.uid]
	if !ok {
		p = &pendingPod{}
		s.pending[c.uid] = p
		s.queue = append(s.queue, p)
	}
	coalesced := p.merge(c)
	s.mu.Unlock()
	if coalesced > 0 {
		s.fanout.metrics.CoalescedEvents.Add(float64(coalesced))
	}
	s.wake.notify()
}

// maxEndedPending is how many containers of one pod that ended (were
// removed) unseen a subscription keeps the whole lives of; past it the
// oldest fold away, which bounds a lagging subscriber's memory by pods
// and containers, not by how many came and went.
const maxEndedPending = 16

// merge adds c to what is pending and returns how many events folding
// saved.
func (p *pendingPod) merge(c *podChange) (coalesced int) {
	p.podRef = c.podRef
	p.changes++
	for _, t := range c.transitions {
		i := p.find(t)
		if i < 0 {
			p.slots = append(p.slots, slot{ts: []transition{t}, change: p.changes, observed: c.observed})
			continue
		}
		sl := &p.slots[i]
		sl.observed = c.observed
		if sl.change == p.changes || (t.old == sl.ts[len(sl.ts)-1].new && t.new.rankTo() > sl.furthest()) {
			// The same change, or the container's life going on: keep.
			sl.ts, sl.change = append(sl.ts, t), p.changes
			continue
		}
		// Back or sideways: fold what is pending.
		coalesced += p.fold(i, t)
	}
	for ended := p.ended(); ended > maxEndedPending; ended-- {
		for i := range p.slots {
			if sl := &p.slots[i]; sl.ts[len(sl.ts)-1].new == stateNonExistent {
				coalesced += p.fold(i, sl.ts[len(sl.ts)-1])
				break
			}
		}
	}
	if c.podSync {
		if p.podSync {
			coalesced++
		}
		p.podSync, p.syncAt = true, c.observed
	}
	if c.conditionMet {
		if p.conditionMet {
			coalesced++
		}
		p.conditionMet, p.conditionAt = true, c.observed
	}
	return coalesced
}

// fold replaces the pending transitions of slot i, followed by t, with
// the one transition from the state the subscriber knows to t's, and
// returns how many events that saved. A slot back where the subscriber
// last saw it goes.
func (p *pendingPod) fold(i int, t transition) (coalesced int) {
	sl := &p.slots[i]
	before := 0
	for _, x := range sl.ts {
		before += deliverable(x.old, x.new)
	}
	last := sl.ts[len(sl.ts)-1]
	if last != t {
		before += deliverable(t.old, t.new)
	}
	net := sl.ts[0]
	net.new, net.name = t.new, t.name
	if t.detail != nil {
		// What the container's latest status said, exit included.
		net.detail = t.detail
	}
	coalesced = max(0, before-deliverable(net.old, net.new))
	sl.ts, sl.change = append(sl.ts[:0], net), p.changes
	if net.old == net.new {
		p.slots = append(p.slots[:i], p.slots[i+1:]...)
	}
	return coalesced
}

// furthest is the furthest rank in its life the slot's container reached,
// as far as the subscriber knows or has pending.
func (sl *slot) furthest() int {
	r := sl.ts[0].old.rankFrom()
	for _, t := range sl.ts {
		r = max(r, t.new.rankTo())
	}
	return r
}

// ended counts the slots of containers that are gone.
func (p *pendingPod) ended() int {
	n := 0
	for i := range p.slots {
		if p.slots[i].ts[len(p.slots[i].ts)-1].new == stateNonExistent {
			n++
		}
	}
	return n
}

func (p *pendingPod) find(t transition) int {
	for i := range p.slots {
		if x := p.slots[i].ts[0]; x.id == t.id && x.sandbox == t.sandbox {
			return i
		}
	}
	return -1
}

func (p *pendingPod) events() []Event {
	return p.appendPodEvents(nil, p.slots, p.podEvents)
}
