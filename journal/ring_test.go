// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/plegkit/pleg"
)

// push pushes one entry, a gap or an event committed alone.
func push(r *ring, e Entry) {
	if e.Gap {
		r.pushGap(e.From, e.Seq)
		return
	}
	r.pushBatch(e.Seq, []pleg.Event{e.Event})
}

// readRing reads up to limit entries numbered above seq, as a read of
// the journal does.
func readRing(r *ring, seq uint64, limit int) []Entry {
	var c copied
	r.copyAfter(&c, seq, limit)
	return c.appendTo(nil)
}

// heldBytes is what the entries held count against the byte bound.
func heldBytes(r *ring) int64 {
	var n int64
	for i := range r.n {
		n += int64(r.at(i).size)
	}
	return n
}

// normalizedEntries is entries with times as decoding returns them.
func normalizedEntries(entries []Entry) []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		e.Event = normalized(e.Event)
		out[i] = e
	}
	return out
}

// manyPods is a relist's commit of pods with perPod events each.
func manyPods(pods, perPod int) []pleg.Event {
	var events []pleg.Event
	for p := range pods {
		for c := range perPod {
			ev := detailed(p*perPod + c)
			ev.PodUID, ev.PodName = fmt.Sprintf("uid-%d", p), fmt.Sprintf("web-%d", p)
			ev.Observed = testNow
			events = append(events, ev)
		}
	}
	return events
}

// The ring gives back what was pushed, whatever the number a reader
// resumes after: in the middle of a run of one pod's events too, whose
// pod is written once.
func TestRingGivesBackWhatWasPushed(t *testing.T) {
	batch := relistBatch()
	var want []Entry
	r := newRing(100, 1<<20, 0)
	push(r, Entry{Seq: 1, Gap: true, From: 1, To: 1})
	want = append(want, Entry{Seq: 1, Gap: true, From: 1, To: 1})
	r.pushBatch(2, batch)
	for i, ev := range batch {
		want = append(want, Entry{Seq: uint64(2 + i), Event: ev})
	}
	alone := detailed(1)
	push(r, Entry{Seq: 14, Event: alone})
	want = append(want, Entry{Seq: 14, Event: alone})
	want = normalizedEntries(want)
	for after := range uint64(len(want)) {
		got := normalizedEntries(readRing(r, after, 100))
		if !reflect.DeepEqual(got, want[after:]) {
			t.Fatalf("after %d:\n got  %+v\n want %+v", after, got, want[after:])
		}
	}
	if got := readRing(r, 5, 2); len(got) != 2 || got[0].Seq != 6 || got[1].Event.PodUID != "pod-1" {
		t.Errorf("2 after 5: %+v, want 6 and 7 of pod-1", got)
	}
	if r.bytes != heldBytes(r) {
		t.Errorf("%d bytes counted, %d held", r.bytes, heldBytes(r))
	}
}

// A ring that turns over lets go of the chunks it no longer uses, reuses
// one, and reads right across them; a commit larger than a chunk takes
// one of its own.
func TestRingArenaTurnsOver(t *testing.T) {
	r := newRing(1000, 1<<30, 0)
	seq := uint64(1)
	for range 20 * chunkSize / 100 {
		push(r, Entry{Seq: seq, Event: event(int(seq))})
		seq++
	}
	if len(r.arena.chunks) > 2 {
		t.Errorf("%d chunks held for 1,000 events of under 100 bytes", len(r.arena.chunks))
	}
	got := readRing(r, 0, 2000)
	if len(got) != 1000 || got[0].Seq != seq-1000 || got[999].Event.ContainerID != fmt.Sprintf("c-%d", seq-1) {
		t.Fatalf("read %d entries from %d, want 1000 from %d", len(got), got[0].Seq, seq-1000)
	}
	for _, e := range got {
		if want := fmt.Sprintf("c-%d", e.Seq); e.Gap || e.Event.ContainerID != want {
			t.Fatalf("entry %d: %+v, want %s", e.Seq, e, want)
		}
	}

	big := manyPods(1, 1)
	big[0].Message = strings.Repeat("m", 2*chunkSize)
	r.pushBatch(seq, big)
	if c := r.arena.chunks[len(r.arena.chunks)-1]; len(c) <= chunkSize {
		t.Errorf("a commit of %d bytes went in a chunk of %d", 2*chunkSize, len(c))
	}
	if got := readRing(r, seq-1, 1); len(got) != 1 || got[0].Event.Message != big[0].Message {
		t.Errorf("the large commit read back as %d entries", len(got))
	}
	r.pushBatch(seq+1, manyPods(1, 1))
	if got := readRing(r, seq, 1); len(got) != 1 || got[0].Seq != seq+1 || got[0].Event.PodUID != "uid-0" {
		t.Errorf("after the large commit: %+v", got)
	}
}

// Events a relist commits take less than half the bytes of the Event
// they are read back as, and the ring's bytes are theirs.
func TestRingHoldsEventsEncoded(t *testing.T) {
	r := newRing(10000, 1<<30, 0)
	batch := manyPods(1000, 3)
	r.pushBatch(1, batch)
	perEvent := float64(r.bytes) / float64(len(batch))
	if size := float64(reflect.TypeFor[pleg.Event]().Size()); perEvent > size/2 {
		t.Errorf("%.0f bytes an event held, an Event takes %.0f", perEvent, size)
	}
	var arena int
	for _, c := range r.arena.chunks {
		arena += len(c)
	}
	if int64(arena) != r.bytes {
		t.Errorf("the arena holds %d bytes, the ring counts %d", arena, r.bytes)
	}
}

// eventCode and eventTypes, one encoding and one decoding, agree.
func TestEventCodes(t *testing.T) {
	for i, typ := range eventTypes {
		if got := eventCode(typ); got != byte(i+1) {
			t.Errorf("%s encodes as %d, decodes from %d", typ, got, i+1)
		}
	}
	if eventTypes[codeRemoved-1] != pleg.ContainerRemoved {
		t.Errorf("codeRemoved decodes as %s", eventTypes[codeRemoved-1])
	}
	if got := eventCode(pleg.ContainerChanged); got != 0 {
		t.Errorf("ContainerChanged, never delivered, encodes as %d", got)
	}
}

// Reads decode beside commits that turn the history over, its chunks
// reused: each reads what was committed under its number, whole.
func TestReadsBesideCommits(t *testing.T) {
	j, err := Open(Options{MaxEvents: 300, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	const commits = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range commits {
			// Batches of a pod's events, large enough to fill chunks.
			events := manyPods(1, 40)
			for k := range events {
				events[k].ContainerID = fmt.Sprintf("c-%d-%d", i, k)
			}
			if err := j.Commit(events, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var page []Entry
	for after := uint64(0); ; {
		select {
		case <-done:
			return
		default:
		}
		page, _ = j.ReadAppend(page, after, 100)
		for _, e := range page {
			if e.Gap {
				continue
			}
			var i, k int
			if _, err := fmt.Sscanf(e.Event.ContainerID, "c-%d-%d", &i, &k); err != nil || e.Event.PodUID != "uid-0" {
				t.Fatalf("entry %d read as %+v", e.Seq, e.Event)
			}
			after = e.Seq
		}
		if len(page) > 0 {
			after = page[len(page)-1].Seq
		}
	}
}
