package api

import (
	"context"
	"sync"

	"github.com/plegkit/pleg"
)

// Journal keeps the latest events of a generator, numbered, in a ring of
// fixed size, for any number of HTTP clients to read at their own pace. It
// reads one lossless subscription and never waits for a client: a client
// that falls further behind than the ring holds is told what it missed.
type Journal struct {
	mu sync.Mutex
	// ring grows to size as events come, so a quiet node does not hold a
	// full ring; ring[(seq-first) % size] holds seq for the size latest.
	ring  []Event
	size  uint64
	next  uint64
	first uint64 // sequence number of the first event ever appended
	// grew is closed and replaced at every append, waking readers.
	grew chan struct{}
}

// NewJournal returns a journal holding up to size events, numbering them
// from first.
func NewJournal(size int, first uint64) *Journal {
	return &Journal{size: uint64(max(size, 1)), next: first, first: first, grew: make(chan struct{})}
}

// Run appends the subscription's events until ctx ends or the subscription
// is closed.
func (j *Journal) Run(ctx context.Context, sub *pleg.Subscription) {
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return
		}
		j.Append(ev)
	}
}

// Append numbers ev and keeps it, and returns its sequence number.
func (j *Journal) Append(ev pleg.Event) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	seq := j.next
	if uint64(len(j.ring)) < j.size {
		j.ring = append(j.ring, NewEvent(seq, ev))
	} else {
		j.ring[(seq-j.first)%j.size] = NewEvent(seq, ev)
	}
	j.next++
	close(j.grew)
	j.grew = make(chan struct{})
	return seq
}

// Last returns the sequence number of the latest event, or first-1 before
// any.
func (j *Journal) Last() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next - 1
}

// Read returns up to max events numbered after `after`, in order; after
// 0 asks for all the journal holds. If the ring no longer holds some of
// the events asked for, gap is the missing range and the events start
// after it. A number ahead of the latest event comes from an earlier run
// whose clock was ahead of this one's (sequence numbers start at the
// start time): gap then runs from after+1 to just before the oldest event
// held, From above To, and the events are all the ring holds. grew is
// closed when the journal next grows, for a reader with nothing left to
// read.
func (j *Journal) Read(after uint64, max int) (events []Event, gap *Event, grew <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	oldest := j.first
	if j.next-j.first > j.size {
		oldest = j.next - j.size
	}
	from := after + 1
	switch {
	case after == 0:
		from = j.first
	case after >= j.next:
		// Another run's number: this run's events are all news to the
		// reader, and what it missed of the other run is unknown.
		gap = &Event{Seq: oldest - 1, Type: TypeGap, From: after + 1, To: oldest - 1}
		from = oldest
	}
	if from < oldest {
		gap = &Event{Seq: oldest - 1, Type: TypeGap, From: from, To: oldest - 1}
		from = oldest
	}
	for seq := from; seq < j.next && len(events) < max; seq++ {
		events = append(events, j.ring[(seq-j.first)%j.size])
	}
	return events, gap, j.grew
}
