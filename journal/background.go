// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"
	"fmt"
	"os"
)

// background does, off the commit path, the work that would have a commit
// wait on a sync of megabytes or on the file system: it starts a new
// segment when the one written is full (syncing the full one outside the
// lock first, so that the rotation under it syncs only what commits wrote
// meanwhile), renews the reservation of sequence numbers before commits
// reach it, and deletes the large segments retention dropped. A commit
// does the work itself where background has not, or where it is small.
func (j *Journal) background(due <-chan struct{}) {
	defer close(j.backgroundDone)
	for {
		select {
		case <-j.stopBackground:
			return
		case <-due:
		}
		j.reserveAhead()
		j.rotateFull()
		j.mu.Lock()
		var doomed []string
		if j.w != nil {
			doomed, j.w.doomed = j.w.doomed, nil
		}
		j.mu.Unlock()
		if kept := deleteDoomed(j.opts.Dir, doomed); len(kept) > 0 {
			j.mu.Lock()
			if j.w != nil {
				j.w.doomed = append(j.w.doomed, kept...)
			}
			j.mu.Unlock()
		}
	}
}

// reserveAhead writes a reservation of numbers well before commits reach
// the last one, and syncs it outside the lock: a commit then never syncs
// for one (writer.commit does, where this did not keep up).
func (j *Journal) reserveAhead() {
	j.mu.Lock()
	w := j.w
	if w == nil || w.reserving || j.next-1+reserveAhead/2 <= w.reserved {
		j.mu.Unlock()
		return
	}
	last := j.next - 1
	upTo := last + reserveAhead
	err := w.append(appendReserve(nil, upTo), false)
	f, head := w.seg, w.head
	w.reserving = err == nil
	j.mu.Unlock()
	if err != nil {
		return // the next commit meets it, and tells it
	}
	err = f.Sync()
	if errors.Is(err, os.ErrClosed) {
		// A rotation closed the segment, and synced it first.
		err = nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.w != w {
		return
	}
	w.reserving = false
	if err == nil {
		w.reserved = max(w.reserved, upTo)
		if last > w.headAt {
			w.headAt = last
			_ = writeHead(head, last) // best effort: the next sync writes it again
		}
	}
}

// rotateFull starts a new segment if the one written is full.
func (j *Journal) rotateFull() {
	j.mu.Lock()
	var f *os.File
	if j.w != nil && j.w.full() {
		f = j.w.seg
	}
	j.mu.Unlock()
	if f == nil {
		return
	}
	_ = f.Sync() // a failure is met again, and told, by the sync under the lock
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.w == nil || j.w.seg != f || !j.w.full() {
		return
	}
	if err := j.w.rotate(j, j.next); err != nil {
		j.degrade(fmt.Errorf("starting a new segment in %s: %w", j.opts.Dir, err))
	} else {
		j.w.dropSegmentsUpTo(j.ring.floor)
	}
	j.updateGauges()
}
