// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/plegkit/pleg"
)

func TestRingExpireBefore(t *testing.T) {
	at := func(s int) Entry {
		return Entry{Event: pleg.Event{Type: pleg.ContainerStarted, Observed: testNow.Add(time.Duration(s) * time.Second)}}
	}
	gap := Entry{Gap: true}
	for _, tc := range []struct {
		name    string
		entries []Entry
		cutoff  int // seconds after testNow
		dropped int
	}{
		{"empty", nil, 5, 0},
		{"all new", []Entry{at(5), at(6)}, 5, 0},
		{"some old", []Entry{at(1), at(2), at(5), at(6)}, 5, 2},
		{"all old", []Entry{at(1), at(2)}, 5, 2},
		// A gap among old events goes with them; one before the first
		// new event stays, telling of events lost among those kept.
		{"gaps", []Entry{gap, at(1), gap, at(2), gap, at(7)}, 5, 4},
		// An old event after a new one (a clock stepped back) stays:
		// what is held stays one run of numbers.
		{"stepped back", []Entry{at(1), at(7), at(2)}, 5, 1},
		{"only gaps", []Entry{gap, gap}, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(100, 1<<20, 0)
			for i, e := range tc.entries {
				e.Seq = uint64(i + 1)
				push(r, e)
			}
			if got := r.expireBefore(testNow.Add(time.Duration(tc.cutoff) * time.Second)); got != tc.dropped {
				t.Errorf("dropped %d, want %d", got, tc.dropped)
			}
			if r.n != len(tc.entries)-tc.dropped || r.floor != uint64(tc.dropped) {
				t.Errorf("%d held above floor %d, want %d above %d", r.n, r.floor, len(tc.entries)-tc.dropped, tc.dropped)
			}
			if want := heldBytes(r); r.bytes != want {
				t.Errorf("%d bytes counted for %d entries of %d", r.bytes, r.n, want)
			}
		})
	}
}

// Events older than the retention go at the next commit or read, beside
// the count bound; a reader from the start is told what went.
func TestRetentionByAgeInMemory(t *testing.T) {
	clock := testingclock.NewFakeClock(testNow)
	j, err := Open(Options{MaxEvents: 8, Retention: time.Hour, First: 1, Clock: clock,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	commit(t, j, 0, 6) // observed at testNow+0s..5s, numbered 1..6
	if got, want := describe(readAll(j, 0)), "1:c-0 2:c-1 3:c-2 4:c-3 5:c-4 6:c-5"; got != want {
		t.Fatalf("before the retention:\n got  %s\n want %s", got, want)
	}
	// Events 0..2 are now older than an hour.
	clock.SetTime(testNow.Add(time.Hour + 2500*time.Millisecond))
	if got, want := describe(readAll(j, 0)), "gap(1..3) 4:c-3 5:c-4 6:c-5"; got != want {
		t.Errorf("after an hour:\n got  %s\n want %s", got, want)
	}
	if got, want := describe(readAll(j, 2)), "gap(3..3) 4:c-3 5:c-4 6:c-5"; got != want {
		t.Errorf("a reader after 2:\n got  %s\n want %s", got, want)
	}
	// Whichever bound is reached first: 8 events at most.
	commit(t, j, 3600, 6) // observed an hour on, numbered 7..12
	if s := j.Status(); s.Events != 8 {
		t.Errorf("%d events held, want the count bound's 8", s.Events)
	}
	clock.SetTime(testNow.Add(3 * time.Hour))
	if got, want := describe(readAll(j, 0)), "gap(1..12)"; got != want {
		t.Errorf("after three hours:\n got  %s\n want %s", got, want)
	}
	if got := j.Last(); got != 12 {
		t.Errorf("Last %d after everything expired, want 12", got)
	}
	commit(t, j, 20000, 1)
	if got, want := describe(readAll(j, 12)), "13:c-20000"; got != want {
		t.Errorf("numbers go on: got %s, want %s", got, want)
	}
}

// A segment goes when its newest event is older than the retention; a
// restart later expires what aged meanwhile.
func TestRetentionByAgeDeletesSegments(t *testing.T) {
	e := newEnv(t)
	e.opts.Retention, e.opts.SegmentBytes, e.opts.First, e.opts.Sync = time.Hour, 400, 1, SyncNever
	j := e.open()
	commit(t, j, 0, 40)
	before := e.segments()
	if len(before) < 4 {
		t.Fatalf("%d segments, want several to expire", len(before))
	}
	e.clock.SetTime(testNow.Add(time.Hour + 20*time.Second)) // events 0..19 old
	commit(t, j, 3620, 1)
	after := e.segments()
	if len(after) >= len(before) {
		t.Errorf("%d segments after the retention, %d before", len(after), len(before))
	}
	for _, p := range before[:len(before)-len(after)] {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it deleted", p, err)
		}
	}
	got := describe(readAll(j, 0))
	if want := "gap(1..20) 21:c-20"; !strings.HasPrefix(got, want) {
		t.Errorf("read from 0: %s, want it to start %s", got, want)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Down for a day: the store opens with every event expired, and
	// only the segment this run writes.
	e.clock.SetTime(testNow.Add(25 * time.Hour))
	j = e.open()
	if got, want := describe(readAll(j, 0)), "gap(1..41)"; got != want {
		t.Errorf("after a day down: %s, want %s", got, want)
	}
	if s := j.Status(); s.Events != 0 {
		t.Errorf("%d events held, want 0", s.Events)
	}
	if n := len(e.segments()); n != 1 {
		t.Errorf("%d segments left, want the one this run writes", n)
	}
	r, _ := j.Restore()
	if len(r.Pods) != 3 {
		t.Errorf("restored %d pods, want 3: retention drops events, not what was last reported", len(r.Pods))
	}
}

// A quiet journal, neither written nor read, expires on its own.
func TestRetentionByAgeWhileQuiet(t *testing.T) {
	clock := testingclock.NewFakeClock(testNow)
	j, err := Open(Options{Retention: time.Minute, First: 1, Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	commit(t, j, 0, 3)
	deadline := time.Now().Add(time.Minute)
	for j.Status().Events != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("events still held after the retention: %+v", j.Status())
		}
		// The loop's ticker is the fake clock's: step once it waits.
		if clock.HasWaiters() {
			clock.Step(expirePeriod(time.Minute))
		}
		time.Sleep(time.Millisecond)
	}
	if clock.Since(testNow) < time.Minute {
		t.Errorf("expired after %v, before the retention", clock.Since(testNow))
	}
}

func TestRetentionOption(t *testing.T) {
	if _, err := Open(Options{Retention: -time.Second}); err == nil {
		t.Error("a negative retention opened")
	}
	for r, want := range map[time.Duration]time.Duration{
		time.Minute: time.Second, time.Hour: 36 * time.Second, 7 * 24 * time.Hour: time.Minute,
	} {
		if got := expirePeriod(r); got != want {
			t.Errorf("expirePeriod(%v) = %v, want %v", r, got, want)
		}
	}
}
