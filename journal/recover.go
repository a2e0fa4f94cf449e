// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/plegkit/pleg"
)

// Outcomes of reading a store at start: the outcome label of
// pleg_journal_recoveries_total.
const (
	// OutcomeNew: there was no store; a new one starts.
	OutcomeNew = "new"
	// OutcomeClean: the last run stopped cleanly.
	OutcomeClean = "clean"
	// OutcomeKilled: the last run was killed in this boot; what it
	// committed was written whole (its page cache outlived it), so
	// nothing is lost.
	OutcomeKilled = "killed"
	// OutcomeCrashed: the machine went down while a run was writing:
	// what it committed after its last sync may be lost, which readers
	// are told as a gap.
	OutcomeCrashed = "crashed"
	// OutcomeTruncated: the store holds fewer events than its head says
	// were committed, and the missing ones are told as a gap.
	OutcomeTruncated = "truncated"
	// OutcomeCorrupt and OutcomeNewer: the store was set aside and a new
	// one starts; readers are told what they miss as a gap.
	OutcomeCorrupt = "corrupt"
	OutcomeNewer   = "newer_version"
	// OutcomeUnusable: the directory cannot be read or locked; the journal
	// runs in memory.
	OutcomeUnusable = "unusable"
	// OutcomeOtherRuntime: the store describes another runtime (another
	// name or endpoint: a hand-run pleg over a simulator, a node moved
	// from containerd to CRI-O); it was set aside, unread, and a new one
	// starts, with a gap. Its containers were never this runtime's: not
	// one of them is reported.
	OutcomeOtherRuntime = "other_runtime"
	// OutcomeUnconfirmedRuntime: the store names a runtime, and the one
	// watched did not say who it is at start (it did not answer): the
	// store was set aside as with OutcomeOtherRuntime, since reporting
	// another runtime's containers as gone is worse than reporting this
	// one's again.
	OutcomeUnconfirmedRuntime = "unconfirmed_runtime"
)

// Runtime identifies the runtime a store describes: the endpoint pleg
// reaches it at and what CRI Version says of it. Two are the same runtime
// when neither their endpoints nor their names differ, where both are
// known: the version is not compared, as an upgrade of containerd on the
// node keeps its containers.
type Runtime struct {
	Endpoint string
	Name     string
	Version  string
}

// IsZero tells that nothing is known of the runtime.
func (r Runtime) IsZero() bool { return r.Endpoint == "" && r.Name == "" }

// Same tells whether r and o may be the same runtime: nothing known of
// either tells they differ.
func (r Runtime) Same(o Runtime) bool {
	differ := func(a, b string) bool { return a != "" && b != "" && a != b }
	return !differ(r.Endpoint, o.Endpoint) && !differ(r.Name, o.Name)
}

// String names the runtime for a log line.
func (r Runtime) String() string {
	name := r.Name
	if name == "" {
		name = "a runtime of unknown name"
	}
	if r.Version != "" {
		name += " " + r.Version
	}
	if r.Endpoint != "" {
		name += " at " + r.Endpoint
	}
	return name
}

// recovered is what the segments of a store say.
type recovered struct {
	segments []segment
	origin   uint64
	created  time.Time
	// floor is the number before the first the oldest segment holds:
	// older ones went with the segments retention deleted.
	floor    uint64
	next     uint64 // the number after the last event or gap
	reserved uint64
	boot     string // of the last run
	// runtime is what the newest checkpoint says of the runtime.
	runtime Runtime
	clean   bool
	pods    map[string]pleg.PodReport
	// ring holds the events and gaps read, within the journal's bounds;
	// nil until the first checkpoint.
	ring *ring
	// strs interns the strings read.
	strs map[string]string
	// tornAt is where the newest segment's last whole record ends, when a
	// record after it was cut short or does not check; -1 if none.
	tornAt  int64
	tornErr error
}

type segment struct {
	name string
	// last is the highest number an event or gap in it holds, 0 if none.
	last uint64
	size int64
	// base is the size of its header and checkpoint: a segment is full
	// when what follows them reaches the segment size, however large its
	// checkpoint.
	base int64
}

// damage is an error that makes a store untrustworthy.
type damage struct {
	file string
	err  error
}

func (d *damage) Error() string { return fmt.Sprintf("%s: %v", d.file, d.err) }
func (d *damage) Unwrap() error { return d.err }

// readStore reads every segment of dir, oldest first. A damage error means
// the store cannot be trusted; any other error that it cannot be read.
func readStore(dir string, maxEvents int, maxBytes int64) (*recovered, error) {
	names, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	rs := newRecovered(maxEvents, maxBytes)
	for i, name := range names {
		data, err := readSegmentFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if err := rs.replay(name, data, i == len(names)-1); err != nil {
			return nil, &damage{name, err}
		}
	}
	return rs, nil
}

func newRecovered(maxEvents int, maxBytes int64) *recovered {
	return &recovered{pods: make(map[string]pleg.PodReport), tornAt: -1, strs: make(map[string]string),
		ring: newRing(maxEvents, maxBytes, 0)}
}

func readSegmentFile(path string) ([]byte, error) {
	f, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, err
	}
	return data, nil
}

// replay applies one segment. In the newest segment a record that is cut
// short or does not check ends the log (newest says where); the caller
// decides whether that is a killed write or damage. Elsewhere it is damage.
func (rs *recovered) replay(name string, data []byte, newest bool) error {
	version, err := checkHeader(data)
	if err != nil {
		if newest && len(data) < headerSize {
			// Created, then killed before its header was written whole.
			rs.segments = append(rs.segments, segment{name: name})
			rs.tornAt, rs.tornErr = 0, errShort
			return nil
		}
		return err
	}
	seg := segment{name: name, size: int64(len(data))}
	first := true
	for off := headerSize; off < len(data); {
		if !first && seg.base == 0 {
			seg.base = int64(off)
		}
		payload, n, err := nextRecord(data[off:])
		if err == nil {
			var r record
			if r, err = decodeRecord(payload, version, rs.strs); err == nil {
				err = rs.apply(&seg, r, first)
			}
		}
		if err != nil {
			if newest {
				rs.tornAt, rs.tornErr, seg.size = int64(off), err, int64(off)
				break
			}
			return fmt.Errorf("at offset %d: %w", off, err)
		}
		off += n
		first = false
	}
	rs.segments = append(rs.segments, seg)
	return nil
}

// apply replays one record into the recovered state.
func (rs *recovered) apply(seg *segment, r record, first bool) error {
	if first != (r.typ == recCheckpoint) {
		return errors.New("a segment must start with a checkpoint, and only there")
	}
	rs.clean = r.typ == recClose
	switch r.typ {
	case recOpen:
		rs.boot = r.boot
	case recReserve:
		rs.reserved = max(rs.reserved, r.upTo)
	case recCheckpoint:
		c := r.checkpoint
		if len(rs.segments) == 0 {
			rs.origin, rs.floor, rs.created = c.origin, c.next-1, c.created
			rs.ring.floor = rs.floor
		}
		rs.next, rs.reserved = max(rs.next, c.next), max(rs.reserved, c.reserved)
		rs.runtime = c.runtime
		clear(rs.pods)
		for _, p := range c.pods {
			rs.pods[p.UID] = p
		}
	case recBatch:
		b := r.batch
		if b.first < rs.next {
			return fmt.Errorf("batch numbered from %d, before %d", b.first, rs.next)
		}
		rs.ring.pushBatch(b.first, b.events)
		rs.next = b.first + uint64(len(b.events))
		if len(b.events) > 0 {
			seg.last = rs.next - 1
		}
		for _, p := range b.pods {
			if len(p.Items) == 0 {
				delete(rs.pods, p.UID)
			} else {
				rs.pods[p.UID] = p
			}
		}
	case recGap:
		if r.from < rs.next {
			return fmt.Errorf("gap from %d, before %d", r.from, rs.next)
		}
		rs.ring.pushGap(r.from, r.to)
		rs.next, seg.last = r.to+1, r.to
	}
	return nil
}

// gapSize is what a gap counts against the byte bound.
const gapSize = 24
