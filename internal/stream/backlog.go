// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"context"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// The backlog.
//
// containerd keeps what happens while no client subscribes and hands it to
// its next subscriber, first thing. A generator restored from a Store
// compares its first relist with what it last reported; if that relist
// lists before the backlog has come, a container that started, exited and
// went while no generator watched is found gone from the state last
// reported (created, say): Died and Removed. Its STARTED then comes too
// late, about a container already reported removed, and its start is
// lost. So the first relist of a generator catching up waits for the
// backlog: until an event sent since the stream connected comes (the
// backlog, sent first, is over), or the stream has been silent for
// BacklogQuiet since it connected or since its last event. Events come
// back to back, so the quiet is long next to the gap between two of them
// on a loaded node, and short next to a restart. A runtime that keeps no
// backlog costs a restored generator that much before its first relist.
// A loaded runtime may begin sending its backlog later than the quiet; a
// relist whose lists show that a backlog must come (a container last
// reported created is gone) waits patiently: for the backlog to begin,
// then for the quiet after its last event.

// BacklogQuiet is how long the stream must be silent for its backlog to
// be taken as over.
const BacklogQuiet = 250 * time.Millisecond

// backlogWatch follows the events of a newly connected stream until its
// backlog is over.
type backlogWatch struct {
	clock clock.WithDelayedExecution
	// news has a token when an event came.
	news chan struct{}

	mu   sync.Mutex
	last time.Time // when the last event of the backlog came
	over bool      // an event sent since the stream connected came
}

func newBacklogWatch(c clock.WithDelayedExecution) *backlogWatch {
	return &backlogWatch{clock: c, news: make(chan struct{}, 1)}
}

// connected starts watching a stream that just connected.
func (b *backlogWatch) connected() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last, b.over = time.Time{}, false
}

// saw records an event of a stream that connected at connectedAt.
func (b *backlogWatch) saw(ev *runtimeapi.ContainerEventResponse, connectedAt time.Time) {
	b.mu.Lock()
	if ev.GetCreatedAt() >= connectedAt.UnixNano() {
		b.over = true
	} else {
		b.last = b.clock.Now()
	}
	b.mu.Unlock()
	select {
	case b.news <- struct{}{}:
	default:
	}
}

// wait returns once the backlog of the connected stream is over, or the
// stream is down: up tells whether it is connected, and since when. It
// waits at most firstAttemptWait. A patient wait does not take the quiet
// since the stream connected for the end of a backlog not begun: it waits
// for a first event, then for the quiet after the last one.
func (b *backlogWatch) wait(ctx context.Context, up func() (bool, time.Time), patient bool) {
	limit := b.clock.NewTimer(firstAttemptWait)
	defer limit.Stop()
	for {
		connected, since := up()
		b.mu.Lock()
		over, quietFrom := b.over, since
		begun := b.last.After(quietFrom)
		if begun {
			quietFrom = b.last
		}
		b.mu.Unlock()
		left := BacklogQuiet - b.clock.Since(quietFrom)
		if patient && !begun {
			left = firstAttemptWait
		}
		if !connected || over || left <= 0 {
			return
		}
		quiet := b.clock.NewTimer(left)
		select {
		case <-b.news:
		case <-quiet.C():
		case <-ctx.Done():
			quiet.Stop()
			return
		case <-limit.C():
			quiet.Stop()
			return
		}
		quiet.Stop()
	}
}
