// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/plegkit/pleg"
)

// writer appends records to the newest segment of a state directory. It
// belongs to the Journal and is used under its lock.
type writer struct {
	dir  string
	lock *os.File
	head *os.File
	seg  *os.File
	// segments are the directory's, oldest first; the last is seg.
	segments []segment
	// reserved is the highest number a synced reservation covers.
	reserved uint64
	segLimit int64
	sync     time.Duration
	// dirty tells that seg was written since it was last synced, and
	// unsynced about how many bytes; dirUnsynced that the directory holds
	// a segment it was not synced with.
	dirty       bool
	unsynced    int64
	dirUnsynced bool
	// due wakes the journal's background work (background.go): a full
	// segment, a reservation to renew, segments to delete.
	due chan struct{}
	// reserving tells that background has a reservation on its way.
	reserving bool
	// headAt is the highest number given to the head file, which must
	// never go back: a store set aside numbers its successor from it.
	headAt uint64
	// doomed are segments retention dropped, for background to delete.
	doomed []string
	// buf is the last commit's records, kept for the next.
	buf []byte
	// tail is seg's mapped tail (tail.go); chunk is how much of it is
	// preallocated at a time, at most maxChunk. noTail tells that seg is written with
	// write(2): its tail could not be mapped, or cannotMap tells that the
	// file system cannot map one.
	tail      tail
	chunk     int64
	maxChunk  int64
	noTail    bool
	cannotMap bool
}

// startWriter starts a new segment, number num, with a checkpoint of the
// journal as it stands, the run's open record and the gap, if any, of what
// an earlier run may have lost; it syncs them, then leaves the journal
// numbering after the gap.
func (j *Journal) startWriter(lock *os.File, segments []segment, reserved uint64, gap *Entry) error {
	w := &writer{dir: j.opts.Dir, lock: lock, segments: segments, segLimit: j.opts.SegmentBytes, sync: j.opts.Sync,
		maxChunk: tailChunk(j.opts.SegmentBytes), cannotMap: !mappable(j.opts.Dir)}
	var err error
	if w.head, err = openFile(filepath.Join(w.dir, headName), os.O_RDWR|os.O_CREATE); err != nil {
		return err
	}
	last := j.next - 1
	if gap != nil {
		last = gap.To
	}
	w.reserved = max(reserved, last+reserveAhead)
	var num uint64 = 1
	if len(segments) > 0 {
		num = segmentNumber(segments[len(segments)-1].name) + 1
	}
	buf := appendOpen(nil, j.opts.BootID, j.opts.Clock.Now())
	if gap != nil {
		buf = appendGap(buf, gap.From, gap.To)
	}
	if err := w.startSegment(num, j.checkpoint(w.reserved), buf, true); err != nil {
		w.close()
		return err
	}
	if gap != nil {
		w.segments[len(w.segments)-1].last = gap.To
		j.ring.pushGap(gap.From, gap.To)
		j.next = gap.To + 1
	}
	w.headAt = j.next - 1
	if err := writeHead(w.head, w.headAt); err != nil {
		w.close()
		return err
	}
	j.w = w
	return nil
}

// checkpoint is the journal as it stands, for the start of a segment.
func (j *Journal) checkpoint(reserved uint64) *checkpoint {
	c := &checkpoint{
		origin:   j.origin,
		next:     j.next,
		reserved: reserved,
		created:  j.created,
		pods:     make([]pleg.PodReport, 0, len(j.pods)),
		runtime:  j.runtime,
	}
	for _, p := range j.pods {
		c.pods = append(c.pods, p)
	}
	return c
}

// startSegment creates segment num with its header, the checkpoint c and
// then more, and makes it the one written. It syncs it and the directory
// if sync is set; else the next sync does.
func (w *writer) startSegment(num uint64, c *checkpoint, more []byte, sync bool) error {
	name := segmentName(num)
	// Read too: a mapping needs it.
	f, err := openFile(filepath.Join(w.dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND)
	if err != nil {
		return err
	}
	buf := appendCheckpoint(header(), c)
	base := int64(len(buf))
	buf = append(buf, more...)
	if _, err := f.Write(buf); err != nil {
		_ = f.Close() // the write failed: that error is the one to tell
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
		if err := syncDir(w.dir); err != nil {
			_ = f.Close()
			return err
		}
	}
	if w.seg != nil {
		_ = w.seg.Close() // rotate synced it; a close makes nothing durable
	}
	w.seg, w.noTail = f, w.cannotMap
	w.dirty, w.unsynced, w.dirUnsynced = !sync, int64(len(buf)), !sync
	if sync {
		w.unsynced = 0
	}
	w.segments = append(w.segments, segment{name: name, size: int64(len(buf)), base: base})
	return nil
}

// commit writes a batch numbered from j.next, with a reservation first if
// it goes past the last one, and starts a new segment if this one is full.
// The journal's pods already hold the batch's reports. It encodes the
// events in e, whatever it returns.
func (w *writer) commit(j *Journal, batch []pleg.Event, e *encoded, pods []pleg.PodReport) error {
	events := len(batch)
	first := j.next
	last := first + uint64(events) - 1
	reserve := events > 0 && last > w.reserved
	buf := w.buf[:0]
	if reserve {
		buf = appendReserve(buf, last+reserveAhead)
	}
	buf = appendBatchEncoding(buf, first, batch, pods, e)
	if cap(buf) <= maxKeptBuffer {
		w.buf = buf
	}
	return w.writeBatch(j, buf, events > 0, reserve, last)
}

// maxKeptBuffer bounds the buffer kept from one commit to the next: a
// relist of a thousand pods, which changed all their containers, encodes
// to about a megabyte.
const maxKeptBuffer = 2 << 20

// writeBatch writes commit's records, syncs them if a reservation or the
// policy asks, and rotates a full segment.
func (w *writer) writeBatch(j *Journal, buf []byte, events, reserve bool, last uint64) error {
	if err := w.write(buf); err != nil {
		return err
	}
	w.unsynced += int64(len(buf))
	active := &w.segments[len(w.segments)-1]
	if events {
		active.last = last
	}
	// A number is given out only once a synced reservation covers it.
	if reserve || w.sync == SyncAlways {
		if err := w.seg.Sync(); err != nil {
			return err
		}
		w.dirty, w.unsynced = false, 0
		if reserve {
			w.reserved = last + reserveAhead
		}
		w.headAt = max(w.headAt, last)
		if err := writeHead(w.head, last); err != nil {
			return err
		}
	}
	if events && last+reserveAhead/2 > w.reserved {
		w.wake()
	}
	if !w.full() {
		return nil
	}
	if w.unsynced <= maxInlineSync || w.due == nil {
		return w.rotate(j, last+1)
	}
	// Much to sync: background syncs it outside the lock, then rotates;
	// until then commits go on into this segment.
	w.wake()
	return nil
}

// maxInlineSync is the most a commit syncs to start a new segment itself,
// and the largest segment it deletes itself: past it, the work is left to
// background, off the commit path (a relist of a thousand pods fills a
// segment in a few commits, and would wait on a sync of megabytes).
const maxInlineSync = 256 << 10

// wake asks background to look for work.
func (w *writer) wake() {
	select {
	case w.due <- struct{}{}:
	default:
	}
}

// full tells that the segment written holds its size past its checkpoint.
func (w *writer) full() bool {
	active := &w.segments[len(w.segments)-1]
	return active.size-active.base >= w.segLimit
}

// write appends buf, whole records, to the segment whole, or leaves the
// segment as it was.
func (w *writer) write(buf []byte) error { return w.append(buf, true) }

// append is write, which maps a tail for buf only if mayMap is set: a
// record written between relists' large commits (background's
// reservation) would have zeros written for a tail the next one cuts.
func (w *writer) append(buf []byte, mayMap bool) error {
	active := &w.segments[len(w.segments)-1]
	if len(buf) <= maxTailCopy && (mayMap || w.tail.mem != nil) {
		if copied, err := w.copyToTail(active.size, buf); err != nil {
			return err
		} else if copied {
			active.size += int64(len(buf))
			w.dirty = true
			return nil
		}
	}
	if err := w.finishTail(); err != nil {
		return err
	}
	w.chunk = 0
	if _, err := w.seg.Write(buf); err != nil {
		// A short write (a full disk) would leave a record cut short,
		// which a later run takes for damage once a segment follows.
		if terr := w.seg.Truncate(active.size); terr != nil {
			err = errors.Join(err, terr)
		}
		return err
	}
	active.size += int64(len(buf))
	w.dirty = true
	return nil
}

// rotate syncs the full segment, cut after its records, and starts the
// next with a checkpoint whose numbering goes on at next.
func (w *writer) rotate(j *Journal, next uint64) error {
	if err := w.finishTail(); err != nil {
		return err
	}
	// The full segment is synced before the next is made: a machine that
	// goes down must not leave a newer segment after an older one cut
	// short, which reads as damage. The new one waits for the next sync,
	// as any commit does.
	if err := w.seg.Sync(); err != nil {
		return err
	}
	c := j.checkpoint(w.reserved)
	c.next = next
	return w.startSegment(segmentNumber(w.segments[len(w.segments)-1].name)+1, c, nil, w.sync == SyncAlways)
}

// dropSegmentsUpTo deletes the segments, but the one written, whose events
// are all numbered floor or below: retention dropped them. A large one is
// left to background, and a crash before it goes leaves an older segment
// the next run reads and drops again.
func (w *writer) dropSegmentsUpTo(floor uint64) {
	n := 0
	for n < len(w.segments)-1 && w.segments[n].last <= floor {
		s := w.segments[n]
		if s.size > maxInlineSync && w.due != nil {
			w.doomed = append(w.doomed, s.name)
			w.wake()
		} else if err := os.Remove(filepath.Join(w.dir, s.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			break
		}
		n++
	}
	w.segments = w.segments[n:]
}

// deleteDoomed deletes the segments retention dropped, and keeps those it
// could not delete for the next time.
func deleteDoomed(dir string, names []string) (kept []string) {
	for _, name := range names {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			kept = append(kept, name)
		}
	}
	return kept
}

// closeCleanly records a clean stop, syncs and closes.
func (w *writer) closeCleanly(last uint64) error {
	w.doomed = deleteDoomed(w.dir, w.doomed)
	err := w.finishTail()
	if err == nil {
		_, err = w.seg.Write(appendClose(nil))
	}
	if err == nil {
		err = w.seg.Sync()
	}
	if err == nil {
		err = writeHead(w.head, last)
	}
	w.close()
	return err
}

// close closes the files and releases the directory. The segment keeps
// the zeros of its tail, which the next run cuts.
func (w *writer) close() {
	_ = w.unmapTail() // nothing is lost: the pages are the file's
	for _, f := range []*os.File{w.seg, w.head, w.lock} {
		if f != nil {
			_ = f.Close() // a close makes nothing durable: Sync does, checked where it matters
		}
	}
}
