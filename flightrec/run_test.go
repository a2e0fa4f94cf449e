// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plegkit/pleg"
)

// switchSource is a generator whose health the test switches.
type switchSource struct {
	mu  sync.Mutex
	err error
}

func (s *switchSource) Status() pleg.Status { return pleg.Status{RelistThreshold: 3 * time.Minute} }

func (s *switchSource) Healthy() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil, s.err
}

func (s *switchSource) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Run, on the bubble's clock: one recording per incident, none within
// the floor of the last, and one again once the floor has passed.
func TestRunRecordsOncePerIncidentAndKeepsTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakeProc(t)
		src := &switchSource{}
		r, err := New(Config{
			Dir: filepath.Join(t.TempDir(), "recordings"), Calls: NewCalls(nil), Source: src,
			MinInterval: 5 * time.Minute, Proc: p.root, Statfs: func(string) error { return nil },
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx)
		}()
		count := func() int {
			synctest.Wait()
			list, err := r.Store().List()
			if err != nil {
				t.Fatal(err)
			}
			return len(list)
		}
		unhealthy := errors.New("pleg was last seen active 3m0s ago")
		steps := []struct {
			err   error
			hold  time.Duration
			total int
		}{
			{nil, 10 * time.Second, 0},
			{unhealthy, 3 * time.Second, 1},  // the onset
			{unhealthy, 10 * time.Minute, 1}, // the same incident
			{nil, 3 * time.Second, 1},        // it ends
			{unhealthy, 3 * time.Second, 2},  // a new one, past the floor
			{nil, 3 * time.Second, 2},
			{unhealthy, 3 * time.Second, 2}, // within the floor of the last
			{unhealthy, 5 * time.Minute, 3}, // the floor passed, the incident still on
			{unhealthy, 30 * time.Minute, 3},
		}
		for i, s := range steps {
			src.set(s.err)
			time.Sleep(s.hold)
			if n := count(); n != s.total {
				t.Fatalf("step %d: %d recordings, want %d", i, n, s.total)
			}
		}
		cancel()
		<-done
	})
}
