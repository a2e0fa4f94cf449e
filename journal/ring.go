// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"slices"
	"sort"

	"github.com/plegkit/pleg"
)

// Entry is one numbered line of the journal: an event, or a gap where
// events were lost.
type Entry struct {
	// Seq orders entries; a reader resumes after the last it read. A
	// gap's Seq is its To.
	Seq   uint64
	Event pleg.Event
	// Gap tells that the entry stands for events that were lost, or that
	// the reader asked for and the journal no longer holds, numbered From
	// to To, inclusive. From is above To for a reader whose number is
	// ahead of the journal's: it comes from a journal that was reset.
	Gap      bool
	From, To uint64
}

// ring holds the entries kept for readers to resume from, oldest first, up
// to a number of events and of bytes (as encoded); past either, the oldest
// go first.
type ring struct {
	maxEvents int
	maxBytes  int64

	buf   []slot // circular; grows up to maxEvents
	head  int    // index of the oldest
	n     int
	bytes int64
	// floor is the Seq of the newest entry dropped, or the journal's
	// origin minus one: every number above it up to the newest is held.
	floor uint64
}

type slot struct {
	Entry
	size int64
}

func newRing(maxEvents int, maxBytes int64, floor uint64) *ring {
	return &ring{maxEvents: maxEvents, maxBytes: maxBytes, floor: floor}
}

func (r *ring) at(i int) *slot {
	i += r.head
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	return &r.buf[i]
}

// push appends e, of size bytes as encoded, and drops the oldest entries
// past the bounds; the newest stays even if it alone exceeds them.
func (r *ring) push(e Entry, size int64) {
	*r.next() = slot{e, size}
	r.pushed(size)
}

// pushEvents pushes events, numbered from first. It copies each event
// once, into its slot: a relist commits thousands.
func (r *ring) pushEvents(first uint64, events []pleg.Event) {
	for i := range events {
		ev := &events[i]
		size := eventSize(ev)
		s := r.next()
		s.Seq, s.Event, s.size = first+uint64(i), *ev, size
		r.pushed(size)
	}
}

// next returns the slot the next entry goes in, zero, making room for it.
func (r *ring) next() *slot {
	if r.n == len(r.buf) {
		r.grow()
	}
	if r.n == len(r.buf) {
		// Full: the oldest's slot is the next one, overwritten at once.
		s := r.advance()
		s.Gap, s.From, s.To = false, 0, 0
		return s
	}
	return r.at(r.n)
}

// pushed counts the entry of size bytes put in the next slot, and drops
// the oldest entries past the bounds.
func (r *ring) pushed(size int64) {
	r.n++
	r.bytes += size
	for r.n > 1 && (r.n > r.maxEvents || r.bytes > r.maxBytes) {
		r.dropOldest()
	}
}

func (r *ring) grow() {
	size := min(max(2*len(r.buf), 64), r.maxEvents)
	if size <= len(r.buf) {
		return
	}
	buf := make([]slot, size)
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}

// dropOldest drops the oldest entry and lets go of what its slot held.
func (r *ring) dropOldest() { *r.advance() = slot{} }

// advance drops the oldest entry and returns its slot, still holding it.
func (r *ring) advance() *slot {
	s := r.at(0)
	r.floor, r.bytes = s.Seq, r.bytes-s.size
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return s
}

// appendAfter appends to dst up to limit entries numbered above seq,
// oldest first.
func (r *ring) appendAfter(dst []Entry, seq uint64, limit int) []Entry {
	i := sort.Search(r.n, func(i int) bool { return r.at(i).Seq > seq })
	dst = slices.Grow(dst, max(min(limit, r.n-i), 0))
	for n := 0; i < r.n && n < limit; i, n = i+1, n+1 {
		dst = append(dst, r.at(i).Entry)
	}
	return dst
}
