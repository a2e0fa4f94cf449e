// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Queue sizes of the runtimes the event modes mirror.
const (
	// containerdSubscriberBuffer is containerd's per-subscriber channel.
	containerdSubscriberBuffer = 100
	// containerdBacklogTTL is how long containerd keeps events while no
	// one subscribes.
	containerdBacklogTTL = 5 * time.Minute
	// crioQueueSize is CRI-O's single event channel, past which it drops.
	crioQueueSize = 1000
)

// eventStats are the event counters Stats reports. They outlive queues.
type eventStats struct {
	published   atomic.Uint64 // handed to a queue
	sent        atomic.Uint64 // written to a subscriber's stream
	dropped     atomic.Uint64 // CRI-O mode: the queue was full
	discarded   atomic.Uint64 // expired from the backlog, or lost by a restart or stop
	waiting     atomic.Int64  // publishers waiting for the queue to take an event
	subscribers atomic.Int64  // open event streams
	backlog     atomic.Int64  // containerd mode: events held for the first subscriber
	stalled     atomic.Bool   // containerd mode: the queue waits for a full subscriber
}

type event = runtimeapi.ContainerEventResponse

// queue carries events from the runtime's changes to the event streams,
// with the semantics of one runtime. A restart replaces the queue, losing
// what it held, as a runtime restart does.
type queue struct {
	mode     EventMode
	clock    clock.Clock
	stats    *eventStats
	stop     chan struct{}
	stopOnce sync.Once
	finished chan struct{}

	// containerd: publishers hand events to one goroutine, which hands
	// them to each subscriber's buffer, waiting when one is full.
	in   chan *event
	subC chan *cdSubscriber

	// CRI-O: publishers drop what does not fit in ch; one goroutine hands
	// each event to each client in turn.
	ch      chan *event
	mu      sync.Mutex
	clients []*crioClient
}

type cdSubscriber struct {
	c      chan *event
	closeC chan struct{}
	once   sync.Once
}

func (s *cdSubscriber) close() { s.once.Do(func() { close(s.closeC) }) }

type crioClient struct {
	c      chan *event
	closeC chan struct{}
	once   sync.Once
}

func newQueue(mode EventMode, clk clock.Clock, stats *eventStats) *queue {
	q := &queue{mode: mode, clock: clk, stats: stats, stop: make(chan struct{}), finished: make(chan struct{})}
	switch mode {
	case EventsContainerd:
		q.in = make(chan *event)
		q.subC = make(chan *cdSubscriber)
		go q.runContainerd()
	case EventsCRIO:
		q.ch = make(chan *event, crioQueueSize)
		go q.runCRIO()
	default:
		close(q.finished)
	}
	return q
}

// shutdown ends the queue: held events are lost, waiting publishers and
// open streams are released. It waits for the queue's goroutine.
func (q *queue) shutdown() {
	q.stopOnce.Do(func() { close(q.stop) })
	<-q.finished
}

// publish stamps ev with the send time, as containerd and CRI-O do, and
// queues it. In containerd mode it waits while the queue's goroutine is
// busy handing an earlier event to a slow subscriber.
func (q *queue) publish(ev *event) {
	ev.CreatedAt = q.clock.Now().UnixNano()
	q.stats.published.Add(1)
	switch q.mode {
	case EventsContainerd:
		q.stats.waiting.Add(1)
		defer q.stats.waiting.Add(-1)
		select {
		case q.in <- ev:
		case <-q.stop:
			q.stats.discarded.Add(1)
		}
	case EventsCRIO:
		select {
		case <-q.stop:
			q.stats.discarded.Add(1)
			return
		default:
		}
		select {
		case q.ch <- ev:
		default:
			q.stats.dropped.Add(1)
		}
	}
}

// subscribe registers an event stream. It returns the stream's channel and
// a function to call when the stream ends, or ok false when the mode sends
// no events (or ctx ended first).
func (q *queue) subscribe(ctx context.Context) (c <-chan *event, cancel func(), ok bool) {
	switch q.mode {
	case EventsContainerd:
		s := &cdSubscriber{c: make(chan *event, containerdSubscriberBuffer), closeC: make(chan struct{})}
		select {
		case q.subC <- s:
			return s.c, s.close, true
		case <-ctx.Done():
		case <-q.stop:
		}
	case EventsCRIO:
		cl := &crioClient{c: make(chan *event), closeC: make(chan struct{})}
		q.mu.Lock()
		q.clients = append(q.clients, cl)
		q.mu.Unlock()
		return cl.c, func() {
			cl.once.Do(func() { close(cl.closeC) })
			q.mu.Lock()
			q.clients = slices.DeleteFunc(q.clients, func(x *crioClient) bool { return x == cl })
			q.mu.Unlock()
		}, true
	}
	return nil, nil, false
}

type backlogged struct {
	ev       *event
	received time.Time
}

// runContainerd is containerd's eventq: broadcast to every subscriber,
// waiting for each; with no subscriber, events are kept up to 5 minutes
// and the next subscriber receives them all before anything new.
func (q *queue) runContainerd() {
	defer close(q.finished)
	var (
		subs     []*cdSubscriber
		backlog  []backlogged
		discardC <-chan time.Time
	)
	defer func() {
		q.stats.discarded.Add(uint64(len(backlog)))
		q.stats.backlog.Store(0)
	}()
	// deliver hands ev to s; false when s closed (or the queue stopped).
	deliver := func(s *cdSubscriber, ev *event) bool {
		select {
		case s.c <- ev:
			return true
		default:
		}
		q.stats.stalled.Store(true)
		defer q.stats.stalled.Store(false)
		select {
		case s.c <- ev:
			return true
		case <-s.closeC:
			return false
		case <-q.stop:
			return false
		}
	}
	for {
		select {
		case <-q.stop:
			return
		case ev := <-q.in:
			if len(subs) == 0 {
				if len(backlog) == 0 {
					discardC = q.clock.After(containerdBacklogTTL)
				}
				backlog = append(backlog, backlogged{ev, q.clock.Now()})
				q.stats.backlog.Store(int64(len(backlog)))
				continue
			}
			active := subs[:0]
			for _, s := range subs {
				if deliver(s, ev) {
					active = append(active, s)
				}
			}
			clear(subs[len(active):])
			subs = active
		case s := <-q.subC:
			closed := false
			for i, b := range backlog {
				if !deliver(s, b.ev) {
					backlog = backlog[i:]
					closed = true
					break
				}
			}
			if !closed {
				backlog, discardC = nil, nil
				subs = append(subs, s)
			}
			q.stats.backlog.Store(int64(len(backlog)))
		case now := <-discardC:
			keep := 0
			for keep < len(backlog) && now.Sub(backlog[keep].received) >= containerdBacklogTTL {
				keep++
			}
			q.stats.discarded.Add(uint64(keep))
			backlog = slices.Delete(backlog, 0, keep)
			discardC = nil
			if len(backlog) > 0 {
				discardC = q.clock.After(containerdBacklogTTL - now.Sub(backlog[0].received))
			}
			q.stats.backlog.Store(int64(len(backlog)))
		}
	}
}

// runCRIO is CRI-O's broadcaster: one goroutine sending each event to each
// client in turn, so one slow client delays the others while the queue
// fills and drops.
func (q *queue) runCRIO() {
	defer close(q.finished)
	for {
		select {
		case <-q.stop:
			q.stats.discarded.Add(uint64(len(q.ch)))
			return
		case ev := <-q.ch:
			q.mu.Lock()
			clients := slices.Clone(q.clients)
			q.mu.Unlock()
			for _, cl := range clients {
				select {
				case cl.c <- ev:
				case <-cl.closeC:
				case <-q.stop:
					q.stats.discarded.Add(uint64(len(q.ch)))
					return
				}
			}
		}
	}
}
