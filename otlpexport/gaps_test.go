// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/plegkit/pleg/journal"
)

// fakeJournal holds entries as a journal's Read would return them,
// gaps included, whatever made them.
type fakeJournal struct {
	mu      sync.Mutex
	entries []journal.Entry
	floor   uint64
	grew    chan struct{}
}

func (f *fakeJournal) Read(after uint64, limit int) ([]journal.Entry, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []journal.Entry
	last := f.entries[len(f.entries)-1].Seq
	if after > last {
		// A cursor ahead of the journal: a gap backwards, as Read gives.
		out = append(out, journal.Entry{Seq: f.floor, Gap: true, From: after + 1, To: f.floor})
		after = f.floor
	}
	for _, e := range f.entries {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, f.grew
}

func (f *fakeJournal) Last() uint64  { return f.entries[len(f.entries)-1].Seq }
func (f *fakeJournal) Floor() uint64 { return f.floor }
func (f *fakeJournal) ID() string    { return "j1" }

func ev(seq uint64) journal.Entry {
	return journal.Entry{Seq: seq, Event: testEvent(int(seq))}
}

// A gap the journal recorded (a machine that went down) is a loss record
// of reason "journal", sent before the events after it; a cursor ahead of
// the journal (a journal reset) goes back to its start, with no loss.
func TestJournalGaps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []journal.Entry
		floor   uint64
		cursor  uint64
		want    string
	}{
		{
			name:    "a gap in the journal",
			entries: []journal.Entry{ev(1), ev(2), {Seq: 5, Gap: true, From: 3, To: 5}, ev(6), ev(7)},
			want:    "1 2 lost(3..5 journal) 6 7",
		},
		{
			name:    "a cursor ahead of the journal",
			entries: []journal.Entry{ev(11), ev(12)},
			floor:   10, cursor: 50,
			want: "11 12",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := &fakeJournal{entries: tc.entries, floor: tc.floor, grew: make(chan struct{})}
				fc := &fakeCollector{}
				cursor := &MemoryCursor{}
				if err := cursor.Save("j1", tc.cursor); err != nil {
					t.Fatal(err)
				}
				e, err := New(j, Options{Client: fc, Cursor: cursor, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					_ = e.Run(ctx)
				}()
				synctest.Wait()
				cancel()
				<-done
				if got := strings.Join(fc.records(), " "); got != tc.want {
					t.Errorf("accepted %s, want %s", got, tc.want)
				}
				if got, _ := cursor.Load("j1"); got != j.Last() {
					t.Errorf("cursor %d, want %d", got, j.Last())
				}
				if n := fmt.Sprint(fc.requests); tc.name == "a gap in the journal" && n != "2" {
					t.Errorf("%s requests, want 2: the loss waits for the batch after the events before it", n)
				}
			})
		})
	}
}
