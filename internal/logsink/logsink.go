// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package logsink is the daemon's log output: a writer that never blocks
// its caller. In a pod, pleg's standard error is a pipe that the pod's
// shim drains into the log file; a shim that is stopped, starved or
// stuck on its disk, which is the kind of incident pleg is there for,
// stops draining it, and once the pipe's 64 KiB are full every write
// would block: the goroutine logging, then every goroutine waiting on the
// log handler's lock, and with them the metrics and the pages. Lines are
// handed to a goroutine that writes them; while it cannot, up to a bound
// of them wait, and those past it are dropped and counted, and a line
// says how many once writing resumes.
package logsink

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxBytes bounds the lines that wait: a few thousand lines, what
// a minute of an incident logs at the default verbosity.
const DefaultMaxBytes = 1 << 20

// Sink is an io.Writer that queues what it is given for a goroutine to
// write to the underlying writer. Each Write is taken whole or dropped
// whole: a slog handler writes one record a call. It is safe for
// concurrent use.
type Sink struct {
	w        io.Writer
	maxBytes int

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	closed  bool
	wake    chan struct{}
	done    chan struct{}
	dropped atomic.Uint64
	// untold are the drops no notice has reported yet.
	untold uint64
}

// New returns a sink writing to w, with up to maxBytes waiting
// (DefaultMaxBytes if 0 or less). Close it to write what waits.
func New(w io.Writer, maxBytes int) *Sink {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	s := &Sink{w: w, maxBytes: maxBytes, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues a copy of p, or drops it when the queue is full or the
// sink closed. It never blocks on the underlying writer and always
// reports p written: a log line that cannot be written must not become an
// error for the code that logged it.
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closed || s.queued+len(p) > s.maxBytes {
		s.untold++
		s.mu.Unlock()
		s.dropped.Add(1)
		return len(p), nil
	}
	s.queue = append(s.queue, append([]byte(nil), p...))
	s.queued += len(p)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Dropped is how many writes were dropped since the start.
func (s *Sink) Dropped() uint64 { return s.dropped.Load() }

func (s *Sink) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		batch, untold, closed := s.queue, s.untold, s.closed
		s.queue, s.queued, s.untold = nil, 0, 0
		s.mu.Unlock()
		for _, line := range batch {
			_, _ = s.w.Write(line) // nowhere to report a log write's failure but the log
		}
		if untold > 0 {
			// The lines were dropped because these filled the queue:
			// the hole comes after them, and is named there.
			_, _ = fmt.Fprintf(s.w, "pleg: %d log lines dropped: the log's reader did not keep up\n", untold)
		}
		if len(batch) == 0 && untold == 0 {
			if closed {
				return
			}
			<-s.wake
		}
	}
}

// Close stops taking lines and waits, at most timeout, for those queued to
// be written; it reports whether they all were. Lines written after
// Close are dropped.
func (s *Sink) Close(timeout time.Duration) bool {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-t.C:
		return false
	}
}
