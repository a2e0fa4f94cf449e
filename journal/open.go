// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/plegkit/pleg"
)

// open reads the state directory and starts writing to it; on the way it
// sets aside a store it cannot trust, and falls back to memory where it
// cannot write.
func (j *Journal) open() {
	dir := j.opts.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		j.inMemory(nil, nil, err)
		return
	}
	// Without the lock (a read-only directory, or another pleg holds it)
	// the journal goes on from what the store says, without writing.
	lock, lockErr := lockDir(dir)
	rs, err := readStore(dir, j.opts.MaxEvents, j.opts.MaxBytes)
	var gap *Entry
	outcome := ""
	if err == nil {
		outcome, gap, err = j.decide(rs)
		if err != nil {
			err = &damage{rs.segments[len(rs.segments)-1].name, err}
		}
	}
	var dmg *damage
	switch {
	case errors.As(err, &dmg) && lockErr == nil:
		if errors.Is(dmg, errNewer) {
			// A downgrade: nothing of the store is read, and nothing of it
			// is deleted either.
			j.setAside(lock, OutcomeNewer, dmg, fmt.Sprintf("The journal's store was written by a newer pleg, "+
				"whose format this one cannot read (it reads format versions 1 to %d): it was moved aside, whole and "+
				"unread, and a new one starts. Clients resuming from an earlier number get a gap, and every running "+
				"container is reported again", formatVersion))
			return
		}
		j.setAside(lock, OutcomeCorrupt, dmg, "The journal's store could not be trusted; it was moved aside and a new "+
			"one starts. Clients resuming from an earlier number get a gap, and every running container is reported again")
		return
	case err != nil:
		if lock != nil {
			_ = lock.Close() // only a lock: nothing written
		}
		j.inMemory(nil, nil, err)
		return
	}
	if reason, why := j.otherRuntime(rs); why != nil {
		if lockErr != nil {
			// Nothing of it is taken, and nothing can be moved.
			j.inMemory(nil, nil, errors.Join(lockErr, why))
			return
		}
		j.setAside(lock, reason, why, "The journal's store describes another runtime than the one watched, or one "+
			"it cannot be confirmed to be: it was moved aside, unread, and a new one starts. None of its containers "+
			"is reported; clients resuming from an earlier number get a gap, and every running container is "+
			"reported again")
		return
	}
	switch {
	case lockErr != nil:
		j.inMemory(rs, gap, lockErr)
		return
	}
	if err := rs.dropTornTail(dir); err != nil {
		_ = lock.Close()
		j.inMemory(rs, gap, err)
		return
	}
	j.adopt(rs)
	if err := j.startWriter(lock, rs.segments, rs.reserved, gap); err != nil {
		j.inMemory(rs, gap, err)
		return
	}
	j.recovered(outcome, rs, gap)
}

// decide tells what the end of the store says of how the last run ended,
// and the gap readers must be told of, if any.
func (j *Journal) decide(rs *recovered) (outcome string, gap *Entry, err error) {
	if len(rs.segments) == 0 {
		return OutcomeNew, nil, nil
	}
	sameBoot := j.opts.BootID != "" && rs.boot == j.opts.BootID
	torn := rs.tornAt >= 0
	head, headOK := readHead(j.opts.Dir)
	gapTo := func(to uint64) *Entry {
		if to < rs.next {
			return nil
		}
		return &Entry{Seq: to, Gap: true, From: rs.next, To: to}
	}
	switch {
	case torn && sameBoot && !errors.Is(rs.tornErr, errShort):
		// A killed process leaves at most its last write cut short; a
		// whole record that does not check is damage.
		return "", nil, rs.tornErr
	case rs.clean && !torn:
		return OutcomeClean, nil, nil
	case !sameBoot:
		// The machine went down under a running journal: what it wrote
		// since its last sync may be gone, up to its last reservation.
		to := rs.reserved
		if headOK {
			to = max(to, head)
		}
		return OutcomeCrashed, gapTo(to), nil
	case headOK && head >= rs.next:
		return OutcomeTruncated, gapTo(head), nil
	default:
		return OutcomeKilled, nil, nil
	}
}

// otherRuntime tells whether the store describes another runtime than the
// one watched, or one that cannot be confirmed to be it, with the outcome
// to count and what to log. A store that names no runtime (written before
// format version 2, or by an embedder that gave none) is taken as it was.
func (j *Journal) otherRuntime(rs *recovered) (string, error) {
	stored, watched := rs.runtime, j.opts.Runtime
	switch {
	case len(rs.segments) == 0 || stored.IsZero():
		return "", nil
	case !stored.Same(watched):
		return OutcomeOtherRuntime, fmt.Errorf("the store describes %v; pleg watches %v", stored, watched)
	case j.opts.RuntimeUnconfirmed && stored.Name != "" && watched.Name == "":
		return OutcomeUnconfirmedRuntime, fmt.Errorf(
			"the store describes %v; the runtime watched did not say who it is at start", stored)
	}
	return "", nil
}

// dropTornTail cuts the newest segment after its last whole record, or
// removes it if not even its header was written.
func (rs *recovered) dropTornTail(dir string) error {
	if rs.tornAt < 0 {
		return nil
	}
	newest := &rs.segments[len(rs.segments)-1]
	path := filepath.Join(dir, newest.name)
	if rs.tornAt < headerSize {
		rs.segments = rs.segments[:len(rs.segments)-1]
		return os.Remove(path)
	}
	f, err := openFile(path, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := f.Truncate(rs.tornAt); err != nil {
		return err
	}
	newest.size = rs.tornAt
	return f.Sync()
}

// adopt takes what the store holds as the journal's own.
func (j *Journal) adopt(rs *recovered) {
	j.origin, j.next, j.created = rs.origin, rs.next, rs.created
	if len(rs.segments) == 0 {
		// A new store: past any number a head left behind says was given.
		first := j.nowSeq()
		if head, ok := readHead(j.opts.Dir); ok {
			first = max(first, head+1)
		}
		j.origin, j.next, rs.floor, j.created = first, first, first-1, j.opts.Clock.Now()
	}
	j.ring = rs.ring
	if len(rs.segments) == 0 {
		j.ring = newRing(j.opts.MaxEvents, j.opts.MaxBytes, rs.floor)
	}
	j.pods = rs.pods
	// What is known now of the runtime, and what the store knew besides.
	j.runtime = j.opts.Runtime
	if j.runtime.Endpoint == "" {
		j.runtime.Endpoint = rs.runtime.Endpoint
	}
	if j.runtime.Name == "" {
		j.runtime.Name, j.runtime.Version = rs.runtime.Name, rs.runtime.Version
	}
	j.restored = make([]pleg.PodReport, 0, len(rs.pods))
	for _, p := range rs.pods {
		j.restored = append(j.restored, p)
	}
}

// recovered says what Open found and did.
func (j *Journal) recovered(outcome string, rs *recovered, gap *Entry) {
	j.recovery = outcome
	j.metrics.recoveries.WithLabelValues(outcome).Inc()
	args := []any{"dir", j.opts.Dir, "outcome", outcome, "pods", len(rs.pods), "events", j.ring.n, "next", j.next}
	if rs.tornAt >= 0 && !errors.Is(rs.tornErr, errEnd) {
		args = append(args, "droppedIncompleteWrite", rs.tornErr)
	}
	switch {
	case gap != nil:
		j.log.Warn("The journal goes on from its directory, but events numbered in the gap may be lost; readers resuming "+
			"across it are told",
			append(args, "gapFrom", gap.From, "gapTo", gap.To)...)
	case outcome == OutcomeNew:
		j.log.Info("The journal starts a new store", args...)
	default:
		j.log.Info("The journal goes on from its directory", args...)
	}
}

// setAside moves a store that cannot be trusted, or that describes
// another runtime, out of the way and starts a new one, logging msg with
// the cause. Its numbers start past the old head's, if that can be read,
// and past the clock's; readers resuming from the old store get a gap.
func (j *Journal) setAside(lock *os.File, reason string, cause error, msg string) {
	// The new store starts with a gap: its first relist reports every
	// container again, as new, and a reader must know.
	from := j.nowSeq()
	if head, ok := readHead(j.opts.Dir); ok {
		from = head + 1
	}
	gap := &Entry{Gap: true, From: from, To: max(from, j.nowSeq())}
	gap.Seq = gap.To
	to, err := setAside(j.opts.Dir, j.stamp(), reason)
	if err != nil {
		_ = lock.Close()
		j.inMemory(nil, nil, errors.Join(cause, err))
		return
	}
	j.startFresh(from)
	if err := j.startWriter(lock, nil, 0, gap); err != nil {
		j.inMemory(nil, nil, err)
		return
	}
	j.recovery = reason
	j.metrics.recoveries.WithLabelValues(reason).Inc()
	j.log.Error(msg, "dir", j.opts.Dir, "reason", reason, "err", cause, "movedTo", to, "next", j.next)
}

// inMemory leaves the journal in memory, going on from rs, past the gap
// of what it may have lost, if it was read.
func (j *Journal) inMemory(rs *recovered, gap *Entry, err error) {
	if rs != nil && len(rs.segments) > 0 {
		j.adopt(rs)
		if gap != nil {
			j.ring.pushGap(gap.From, gap.To)
			j.next = gap.To + 1
		}
		j.next = max(j.next, j.nowSeq())
	} else {
		j.startFresh(j.nowSeq())
	}
	j.degraded = err
	j.recovery = OutcomeUnusable
	j.metrics.recoveries.WithLabelValues(OutcomeUnusable).Inc()
	j.log.Error("The journal cannot use its directory and keeps events in memory only: a restart will report a gap, "+
		"and running containers again unless the directory could be read",
		"dir", j.opts.Dir, "err", err, "readStore", rs != nil, "restoredPods", len(j.restored), "next", j.next)
}
