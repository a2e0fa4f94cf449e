// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// A commit copies its records into the newest segment's tail, which is
// preallocated and mapped, instead of writing them with write(2). The
// mapping is the file's own page cache, the pages write(2) would fill: a
// killed process loses nothing either way, and a sync writes both out
// alike. The copy costs a tenth of the system call, which was most of what
// keeping the journal on disk added to an event's delivery
// (BenchmarkCommit, BenchmarkStoreEventLatency).
//
// The tail is preallocated by writing zeros, so that a full disk is told
// there, as an error, and never as a SIGBUS on a page the file system
// cannot back when a commit touches it. That holds where a block written
// once is overwritten in place, or its space reserved at write(2): ext4,
// XFS and tmpfs, where the journal maps its tail (mappable). Elsewhere
// (btrfs and ZFS copy on write; network and FUSE file systems; overlayfs,
// whose upper layer is not known) segments are written with write(2), as
// before. Zeros rather than fallocate(2): on ext4 a write into a block
// fallocate left unwritten has a kernel worker convert it, which cost the
// commits on these two cores more than the zeros' one write a chunk.
//
// Past the last record the tail holds zeros: a reader takes a zero length
// for the end of what was written (nextRecord). A commit copies its
// records whole but the first record's length, then that length: a kill
// between the two leaves a zero where the records begin, so it loses the
// commit whole, never a part of it, exactly as a torn write(2) would.

// tail is the mapped part of the segment being written.
type tail struct {
	mem []byte
	// off is the file offset of mem[0], a page boundary.
	off int64
}

// Sizes of the preallocated tail: up to a quarter of a segment, so that a
// full one costs a few mappings, within bounds that keep small segments
// (the tests') mapped and a large one from holding much disk it may never
// use.
const (
	minTailChunk = 16 << 10
	maxTailChunk = 1 << 20
)

// maxTailCopy is the largest commit copied to the tail: a larger one (a
// relist of many pods) is written, as write(2) fills many pages for less
// than a page fault each costs (BenchmarkCommitRelist: 1.8 against 2.1 ms
// for a megabyte).
const maxTailCopy = 64 << 10

var pageSize = int64(os.Getpagesize())

// tailChunk is how much a segment of the given size preallocates at a time.
func tailChunk(segLimit int64) int64 {
	return min(max(segLimit/4, minTailChunk), maxTailChunk)
}

// copyToTail copies buf, whole records, to the segment at size, mapping
// more of the file if it does not fit. It returns false, having changed
// nothing, where the tail cannot be mapped: the caller writes buf instead.
//
// A page the file system cannot back faults (SIGBUS): one it turned
// read-only after an error, or a segment cut short by another process.
// The fault is made an error, which leaves the journal in memory as a
// failed write(2) does, rather than the end of the daemon.
func (w *writer) copyToTail(size int64, buf []byte) (copied bool, err error) {
	if w.tail.mem == nil || size+int64(len(buf)) > w.tail.off+int64(len(w.tail.mem)) {
		if !w.mapTail(size, int64(len(buf))) {
			return false, nil
		}
	}
	// A fault panics, instead of killing the process, while this copies;
	// any other panic goes on.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			copied, err = true, fmt.Errorf("writing the segment's mapped tail: %v", r)
		}
	}()
	at := w.tail.mem[size-w.tail.off:]
	copy(at[4:], buf[4:])
	binary.LittleEndian.PutUint32(at, binary.LittleEndian.Uint32(buf))
	return true, nil
}

// mapTail preallocates at least need bytes of the segment from size and
// maps them, in place of what was mapped.
func (w *writer) mapTail(size, need int64) bool {
	if w.noTail {
		return false
	}
	if err := w.unmapTail(); err != nil {
		w.noTail = true
		return false
	}
	// The chunk doubles from the smallest while commits are copied, and
	// starts again after one was written: relists that commit a large
	// batch, then a small one, do not have zeros written for a tail the
	// next large one cuts.
	w.chunk = min(max(2*w.chunk, minTailChunk), w.maxChunk)
	end := size + max(need, w.chunk)
	end = (end + pageSize - 1) &^ (pageSize - 1)
	err := w.fillZeros(end)
	if err == nil {
		off := size &^ (pageSize - 1)
		var mem []byte
		prot := unix.PROT_READ | unix.PROT_WRITE
		if mem, err = unix.Mmap(int(w.seg.Fd()), off, int(end-off), prot, unix.MAP_SHARED); err == nil {
			w.tail = tail{mem: mem, off: off}
			return true
		}
		// A file system that cannot map is never asked again.
		w.cannotMap = true
	}
	// Out of space: this segment is written with write(2), which tells
	// the journal. The zeros written before the error go.
	w.noTail = true
	_ = w.seg.Truncate(size) // best effort: zeros past size read as the end of the records
	return false
}

// fillZeros appends zeros to the segment up to end: the segment is opened
// to append, and everything past its records is zeros already.
func (w *writer) fillZeros(end int64) error {
	fi, err := w.seg.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= end {
		return nil
	}
	zeros := make([]byte, min(end-fi.Size(), 64<<10))
	for at := fi.Size(); at < end; at += int64(len(zeros)) {
		if _, err := w.seg.Write(zeros[:min(int64(len(zeros)), end-at)]); err != nil {
			return err
		}
	}
	return nil
}

// mappable tells whether the journal maps its tail in dir: on a file
// system that backs a block it wrote zeros to without allocating again.
func mappable(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

// unmapTail unmaps the tail; the file keeps its zeros past the records.
func (w *writer) unmapTail() error {
	if w.tail.mem == nil {
		return nil
	}
	err := unix.Munmap(w.tail.mem)
	w.tail = tail{}
	return err
}

// finishTail unmaps the tail and cuts the segment after its records, for
// write(2) to append after them (a clean stop's record), or for a segment
// that is done to hold no zeros.
func (w *writer) finishTail() error {
	if w.tail.mem == nil {
		return nil
	}
	if err := w.unmapTail(); err != nil {
		return err
	}
	return w.seg.Truncate(w.segments[len(w.segments)-1].size)
}
