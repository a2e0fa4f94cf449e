// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"slices"
	"sort"
	"time"

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
//
// Events are held as a segment holds them, encoded once for both, in an
// arena of bytes, and indexed by slots that hold no pointer either: the
// garbage collector never scans the history, and a commit's events go in
// with one copy of their bytes. A pleg.Event holds a dozen pointers and
// takes 250 bytes; encoded, a relist's take about 100. A reader pays
// instead, decoding what it reads.
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

	arena arena
	// scratch encodes the events pushed without their encoding: those
	// read from a segment, or of a test.
	scratch encoded
}

// slot is one entry of the ring: a gap, or where an event's bytes are.
type slot struct {
	seq uint64
	// from is a gap's first number.
	from uint64
	// observed is the event's observed time in nanoseconds since the
	// epoch, 0 for none: retention reads it without decoding.
	observed int64
	// chunk is the number of the arena's chunk that holds the event; a
	// gap's is the chunk written when it was pushed, so that chunks go in
	// the order of the entries.
	chunk uint64
	// off and size are where the event is in its chunk; anchor is where
	// the event that names its pod is, itself or one before it in its
	// commit. size is what the entry counts against the byte bound.
	off, anchor, size uint32
	code              byte // the event's type, as encoded
	gap               bool
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

// pushGap pushes a gap of the numbers from to to.
func (r *ring) pushGap(from, to uint64) {
	*r.next() = slot{seq: to, from: from, chunk: r.arena.current(), size: gapSize, gap: true}
	r.pushed(gapSize)
	r.release()
}

// pushEvents pushes events, numbered from first, encoded as e.
func (r *ring) pushEvents(first uint64, events []pleg.Event, e *encoded) {
	if len(events) == 0 {
		return
	}
	chunk, base := r.arena.put(e.b)
	start := 0
	for i := range events {
		end := e.ends[i]
		s := r.next()
		*s = slot{
			seq: first + uint64(i), observed: unixNano(events[i].Observed), chunk: chunk,
			off: base + uint32(start), anchor: base + uint32(e.anchors[i]), size: uint32(end - start),
			code: e.b[start],
		}
		r.pushed(int64(end - start))
		start = end
	}
	r.release()
}

// pushBatch pushes events, numbered from first, encoding them.
func (r *ring) pushBatch(first uint64, events []pleg.Event) {
	r.scratch.encode(events)
	r.pushEvents(first, events, &r.scratch)
}

// next returns the slot the next entry goes in, making room for it.
func (r *ring) next() *slot {
	if r.n == len(r.buf) {
		r.grow()
	}
	if r.n == len(r.buf) {
		// Full: the oldest's slot is the next one, overwritten at once.
		return r.advance()
	}
	return r.at(r.n)
}

// pushed counts the entry of size bytes put in the next slot, and drops
// the oldest entries past the bounds.
func (r *ring) pushed(size int64) {
	r.n++
	r.bytes += size
	for r.n > 1 && (r.n > r.maxEvents || r.bytes > r.maxBytes) {
		r.advance()
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

// advance drops the oldest entry and returns its slot.
func (r *ring) advance() *slot {
	s := r.at(0)
	r.floor, r.bytes = s.seq, r.bytes-int64(s.size)
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return s
}

// release lets go of the arena's chunks that no entry held uses.
func (r *ring) release() {
	oldest := r.arena.current()
	if r.n > 0 {
		oldest = r.at(0).chunk
	}
	r.arena.releaseBefore(oldest)
}

// entry decodes the i-th entry held. pod keeps the pod last decoded: a
// commit's events name theirs once for a run of the same pod's.
func (r *ring) entry(i int, pod *podNames) Entry {
	s := r.at(i)
	if s.gap {
		return Entry{Seq: s.seq, Gap: true, From: s.from, To: s.seq}
	}
	c := r.arena.chunk(s.chunk)
	b := c[s.off : s.off+s.size]
	var p *podName
	if b[1]&flagSamePod != 0 {
		p = pod.at(c, s.chunk, s.anchor)
	}
	return decodeEvent(s, b, p)
}

// decodeEvent decodes the event of slot s, encoded as b, whose pod is p if
// b refers back to it.
func decodeEvent(s *slot, b []byte, p *podName) Entry {
	// The event's observed time is in the slot: the one it may refer
	// back to for it is equal.
	prev := pleg.Event{Observed: fromUnixNano(s.observed)}
	if p != nil {
		prev.PodUID, prev.PodName, prev.PodNamespace = p.uid, p.name, p.ns
	}
	d := decoder{b: b, version: formatVersion}
	ev := d.event(&prev)
	if d.end() != nil {
		// The ring holds what this process encoded: not reached but by
		// a bug, which a reader is told of as the event lost.
		return Entry{Seq: s.seq, Gap: true, From: s.seq, To: s.seq}
	}
	return Entry{Seq: s.seq, Event: ev}
}

// podName is a pod as an event names it.
type podName struct{ uid, name, ns string }

// podNames is the pod an anchor names, decoded once for the events that
// refer to it.
type podNames struct {
	chunk  uint64
	anchor uint32
	ok     bool
	pod    podName
}

func (p *podNames) at(c []byte, chunk uint64, anchor uint32) *podName {
	if !p.ok || p.chunk != chunk || p.anchor != anchor {
		d := decoder{b: c[anchor:], version: formatVersion}
		d.byte() // its type
		d.byte() // its flags, which do not refer back
		*p = podNames{chunk: chunk, anchor: anchor, ok: true, pod: podName{d.string(), d.string(), d.string()}}
	}
	return &p.pod
}

// copied are entries copied out of the ring, to decode later: a reader
// of thousands holds the journal's lock for their copy, not their
// decoding, and the chunks they came from may be reused meanwhile.
type copied struct {
	// slots are the entries'; an event's off is in b, and its anchor,
	// if it refers back to its pod, an index in pods.
	slots []slot
	b     []byte
	pods  []podName
}

// copyAfter copies to c up to limit entries numbered above seq, oldest
// first.
func (r *ring) copyAfter(c *copied, seq uint64, limit int) {
	clear(c.pods)
	c.slots, c.b, c.pods = c.slots[:0], c.b[:0], c.pods[:0]
	i := sort.Search(r.n, func(i int) bool { return r.at(i).seq > seq })
	var pod podNames
	for n := 0; i < r.n && n < limit; i, n = i+1, n+1 {
		s := *r.at(i)
		if !s.gap {
			chunk := r.arena.chunk(s.chunk)
			b := chunk[s.off : s.off+s.size]
			if b[1]&flagSamePod != 0 {
				if !pod.ok || pod.chunk != s.chunk || pod.anchor != s.anchor {
					c.pods = append(c.pods, *pod.at(chunk, s.chunk, s.anchor))
				}
				s.anchor = uint32(len(c.pods) - 1)
			}
			s.off = uint32(len(c.b))
			c.b = append(c.b, b...)
		}
		c.slots = append(c.slots, s)
	}
}

// appendTo appends to dst the entries copied, decoded.
func (c *copied) appendTo(dst []Entry) []Entry {
	dst = slices.Grow(dst, len(c.slots))
	for i := range c.slots {
		s := &c.slots[i]
		if s.gap {
			dst = append(dst, Entry{Seq: s.seq, Gap: true, From: s.from, To: s.seq})
			continue
		}
		b := c.b[s.off : s.off+s.size]
		var p *podName
		if b[1]&flagSamePod != 0 {
			p = &c.pods[s.anchor]
		}
		dst = append(dst, decodeEvent(s, b, p))
	}
	return dst
}

// removed calls fn with every ContainerRemoved held.
func (r *ring) removed(fn func(ev *pleg.Event)) {
	var pod podNames
	for i := range r.n {
		if s := r.at(i); !s.gap && s.code == codeRemoved {
			if e := r.entry(i, &pod); !e.Gap {
				fn(&e.Event)
			}
		}
	}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// arena holds the ring's encoded events in chunks, oldest first, numbered
// on from 0. A commit's events go in one chunk: an event and the one that
// names its pod are never apart.
type arena struct {
	chunks [][]byte // the last is written to
	first  uint64   // the number of chunks[0]
	// spares are the chunks let go of last, kept for the next: a ring
	// that turns over allocates none.
	spares [][]byte
}

// chunkSize is the size of a chunk, but for one that holds a commit
// larger: a relist's of a thousand pods, say.
const chunkSize = 256 << 10

// maxSpares is how many chunks an arena keeps for reuse: the two a
// commit larger than a chunk, and the one after it, let go of.
const maxSpares = 2

// put copies b into the arena and tells where it went.
func (a *arena) put(b []byte) (chunk uint64, off uint32) {
	last := len(a.chunks) - 1
	if last < 0 || cap(a.chunks[last])-len(a.chunks[last]) < len(b) {
		a.chunks = append(a.chunks, a.newChunk(len(b)))
		last++
	}
	c := a.chunks[last]
	a.chunks[last] = append(c, b...)
	return a.first + uint64(last), uint32(len(c))
}

func (a *arena) newChunk(size int) []byte {
	for i, c := range a.spares {
		if cap(c) >= size {
			a.spares = slices.Delete(a.spares, i, i+1)
			return c[:0]
		}
	}
	return make([]byte, 0, max(chunkSize, size))
}

// current is the number of the chunk written to, or to be.
func (a *arena) current() uint64 { return a.first + uint64(max(len(a.chunks)-1, 0)) }

func (a *arena) chunk(num uint64) []byte { return a.chunks[num-a.first] }

// releaseBefore lets go of the chunks numbered below num.
func (a *arena) releaseBefore(num uint64) {
	if num <= a.first {
		return
	}
	k := int(min(num-a.first, uint64(len(a.chunks))))
	for _, c := range a.chunks[:k] {
		if len(a.spares) == maxSpares {
			a.spares = slices.Delete(a.spares, 0, 1)
		}
		a.spares = append(a.spares, c)
	}
	a.chunks = slices.Delete(a.chunks, 0, k)
	a.first += uint64(k)
}
