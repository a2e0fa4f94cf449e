// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package journal keeps what a generator reported: its events, numbered,
// for clients to resume from, and what it last reported of every
// container, for a generator started again to carry on from. It is the
// daemon's pleg.Store and the source of GET /v1/events.
//
// With a directory, it is an append-only log of checksummed records in
// segment files: an event is written before any reader can see it, so a
// daemon killed at any moment loses nothing and, started again, repeats
// nothing; sequence numbers continue across restarts and never go back.
// Writes reach the disk at the sync period (a flag): a machine that goes
// down loses at most what was written since the last sync, and readers
// are told what may be lost as a gap. A store that cannot be trusted is
// set aside and a new one starts, with a gap; a directory that cannot be
// written leaves the journal in memory, with an error in the log. Without a directory
// the journal is in memory only.
package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg"
)

// Defaults of Options.
const (
	DefaultMaxEvents = 65536
	DefaultMaxBytes  = 32 << 20
	DefaultSync      = time.Second
)

// Sync policies besides a period.
const (
	// SyncAlways syncs every commit before it returns.
	SyncAlways time.Duration = -1
	// SyncNever leaves writing back to the operating system.
	SyncNever time.Duration = -2
)

// reserveAhead is how many sequence numbers a synced reservation covers: a
// machine that goes down skips at most that many.
const reserveAhead = 1 << 16

// Options configure a Journal.
type Options struct {
	// Dir is the state directory; empty keeps the journal in memory.
	Dir string
	// MaxEvents and MaxBytes bound the events kept for readers to resume
	// from, by count and by encoded size; the oldest go first. Defaults
	// 65,536 and 32 MiB.
	MaxEvents int
	MaxBytes  int64
	// Retention, if positive, also drops the events observed longer ago
	// than that, and the segments that held only those: whichever of the
	// three bounds is reached first. Zero keeps events however old.
	Retention time.Duration
	// Sync is how often writes are forced to disk: a period (default 1 s),
	// SyncAlways or SyncNever. A machine that goes down loses what was
	// written since the last sync; a killed process loses nothing.
	Sync time.Duration
	// SegmentBytes is the size past which a new segment file starts;
	// default a quarter of MaxBytes, between 64 KiB and 4 MiB.
	SegmentBytes int64
	// First is the first number of a new store, or of a journal in
	// memory; default the clock's time in microseconds, which no earlier
	// journal on the machine can have reached unless it gave out a million
	// numbers a second.
	First uint64
	// BootID names the machine's boot, to tell a killed process (whose
	// writes the kernel kept) from a machine that went down; default
	// /proc/sys/kernel/random/boot_id.
	BootID string
	// Runtime is the runtime the generator watches, as far as it is known
	// at start. A store that describes another one is set aside, unread
	// (OutcomeOtherRuntime); what is known of it is kept in the store for
	// the next run to compare. Zero compares nothing.
	Runtime Runtime
	// RuntimeUnconfirmed tells that the runtime was asked who it is and
	// did not say (Runtime.Name is then empty): a store that names a
	// runtime is set aside (OutcomeUnconfirmedRuntime) rather than taken
	// on trust.
	RuntimeUnconfirmed bool
	Clock              clock.WithTicker
	Logger             *slog.Logger
	Registerer         prometheus.Registerer
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxEvents == 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Sync == 0 {
		o.Sync = DefaultSync
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = min(max(o.MaxBytes/4, 64<<10), 4<<20)
	}
	if o.BootID == "" {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			o.BootID = strings.TrimSpace(string(b))
		}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var errs []error
	if o.MaxEvents < 1 {
		errs = append(errs, fmt.Errorf("max events %d: must be at least 1", o.MaxEvents))
	}
	if o.MaxBytes < 1 {
		errs = append(errs, fmt.Errorf("max bytes %d: must be at least 1", o.MaxBytes))
	}
	if o.Sync < SyncNever {
		errs = append(errs, fmt.Errorf("sync %v: want a period, SyncAlways or SyncNever", o.Sync))
	}
	if o.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention %v: must be 0 (off) or more", o.Retention))
	}
	if o.SegmentBytes < 1 {
		errs = append(errs, fmt.Errorf("segment bytes %d: must be at least 1", o.SegmentBytes))
	}
	return o, errors.Join(errs...)
}

// Journal is the store and the event log. All methods are safe for
// concurrent use.
type Journal struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	// id names the journal; see ID.
	id string

	mu   sync.Mutex
	ring *ring
	// copies are what reads copy entries out of the ring in, to decode
	// them after the lock.
	copies sync.Pool
	// enc is the commit's events encoded, for the segment and the ring.
	enc    encoded
	origin uint64 // the first number this store gave out
	next   uint64
	pods   map[string]pleg.PodReport
	// restored is what Restore returns, once: the pods read from the
	// store; nil if none was read.
	restored []pleg.PodReport
	// created is when the store was created, zero in memory.
	created time.Time
	// runtime is what the store says of the runtime it describes.
	runtime Runtime
	grew    chan struct{}
	// grewHanded tells that a reader was given grew since it was made.
	grewHanded bool
	// w writes to the directory; nil in memory.
	w *writer
	// head is the head file, kept after a failure to write: rewritten in
	// place, it may go on recording the numbers given out, so that the
	// next run does not give them again.
	head *os.File
	// degraded says why the journal is in memory although it has a
	// directory.
	degraded error
	recovery string
	closed   bool

	stopSync chan struct{}
	syncDone chan struct{}
	// fsync syncs a segment for the sync loop: (*os.File).Sync, but in
	// tests of a disk that fails.
	fsync func(*os.File) error

	stopBackground chan struct{}
	backgroundDone chan struct{}

	stopExpire chan struct{}
	expireDone chan struct{}
}

var _ pleg.Store = (*Journal)(nil)

// Open opens the journal in opts.Dir, reading what an earlier run left
// there, or a journal in memory. It fails only on bad options: a store it
// cannot trust is set aside, and a directory it cannot use leaves the
// journal in memory, each said in the log, a metric and Status.
func Open(opts Options) (*Journal, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	j := &Journal{
		opts:    opts,
		log:     opts.Logger,
		metrics: m,
		pods:    make(map[string]pleg.PodReport),
		grew:    make(chan struct{}),
		runtime: opts.Runtime,
		fsync:   (*os.File).Sync,
	}
	if opts.Dir == "" {
		j.startFresh(j.nowSeq())
		j.recovery = "in memory"
	} else {
		j.open()
	}
	// A journal that does not write to its directory (another pleg holds
	// it, or it cannot be written) numbers from the clock on its own: it
	// takes an ID of its own too, and leaves the directory's alone.
	dir := opts.Dir
	if j.w == nil {
		dir = ""
	}
	id, err := loadID(dir)
	if err != nil {
		j.log.Warn("The journal's ID could not be kept in its directory: this run has an ID of its own, and "+
			"consumers downstream see its events as another journal's", "dir", opts.Dir, "err", err)
	}
	j.id = id
	j.expire()
	j.updateGauges()
	if j.w != nil && opts.Sync > 0 {
		j.stopSync, j.syncDone = make(chan struct{}), make(chan struct{})
		go j.syncLoop()
	}
	if j.w != nil {
		j.w.due = make(chan struct{}, 1)
		j.stopBackground, j.backgroundDone = make(chan struct{}), make(chan struct{})
		go j.background(j.w.due)
	}
	if opts.Retention > 0 {
		j.stopExpire, j.expireDone = make(chan struct{}), make(chan struct{})
		go j.expireLoop()
	}
	return j, nil
}

// nowSeq is the first number of a journal that has none to go on from.
func (j *Journal) nowSeq() uint64 {
	if j.opts.First != 0 {
		return j.opts.First
	}
	return uint64(j.opts.Clock.Now().UnixMicro())
}

func (j *Journal) startFresh(first uint64) {
	j.origin, j.next = first, first
	j.ring = newRing(j.opts.MaxEvents, j.opts.MaxBytes, first-1)
	if j.opts.Dir != "" {
		j.created = j.opts.Clock.Now()
	}
}

// Restore returns the pods as last reported, the containers reported
// removed among the events held, and when the store was created; once,
// later calls return nothing.
func (j *Journal) Restore() (pleg.Restored, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.restored == nil {
		return pleg.Restored{}, nil
	}
	out := pleg.Restored{Pods: j.restored, Since: j.created, Removed: make(map[string]time.Time)}
	j.ring.removed(func(ev *pleg.Event) { out.Removed[ev.ContainerID] = ev.Observed })
	j.restored = nil
	return out, nil
}

// Commit numbers events, writes them with the pods' reports and only then
// makes them readable. An error tells that they could not be written; the
// journal then keeps them, and all that follow, in memory only.
func (j *Journal) Commit(events []pleg.Event, pods []pleg.PodReport) error {
	start := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	for _, p := range pods {
		if len(p.Items) == 0 {
			delete(j.pods, p.UID)
		} else {
			j.pods[p.UID] = p
		}
	}
	// The writer encodes the events in its record, the ring copies them
	// from there.
	if j.w == nil {
		j.enc.encode(events)
	} else if err = j.w.commit(j, events, &j.enc, pods); err != nil {
		j.degrade(fmt.Errorf("writing to %s: %w", j.opts.Dir, err))
	}
	j.ring.pushEvents(j.next, events, &j.enc)
	j.next += uint64(len(events))
	j.expire()
	if j.w != nil {
		j.w.dropSegmentsUpTo(j.ring.floor)
	} else if j.head != nil && len(events) > 0 {
		_ = writeHead(j.head, j.next-1) // best effort: the disk failed already
	}
	if len(events) > 0 && j.grewHanded {
		// Only a channel a reader was given needs closing; a commit
		// nobody waits on keeps it, and allocates nothing for it.
		close(j.grew)
		j.grew, j.grewHanded = make(chan struct{}), false
	}
	j.updateGauges()
	j.metrics.commitDuration.Observe(time.Since(start).Seconds())
	return err
}

// degrade leaves the journal in memory after a failure to write. Numbers
// jump to the clock's, so that a later run, which goes on from what was
// written, cannot give out numbers readers of this one saw.
func (j *Journal) degrade(err error) {
	j.head, j.w.head = j.w.head, nil
	j.w.close()
	j.w = nil
	j.degraded = err
	j.next = max(j.next, j.nowSeq())
	j.log.Error("The journal cannot write to its directory: events are kept in memory only until pleg restarts, "+
		"and a restart will report a gap; free the disk or fix the directory, then restart pleg",
		"dir", j.opts.Dir, "err", err)
}

// Read returns up to limit entries numbered after `after`, oldest first, and
// a channel closed when the journal next grows. after 0 asks for all the
// journal holds. A reader whose number the journal no longer holds, or one
// ahead of it (from a store set aside, or a journal in memory restarted),
// gets a gap first.
func (j *Journal) Read(after uint64, limit int) ([]Entry, <-chan struct{}) {
	return j.ReadAppend(nil, after, limit)
}

// ReadAppend is Read appending to dst[:0]: a reader of the whole journal
// (GET /v1/history) reuses one batch's memory.
func (j *Journal) ReadAppend(dst []Entry, after uint64, limit int) ([]Entry, <-chan struct{}) {
	c, _ := j.copies.Get().(*copied)
	if c == nil {
		c = new(copied)
	}
	defer j.putCopied(c)
	j.mu.Lock()
	j.expire()
	out := dst[:0]
	floor := j.ring.floor
	switch {
	case after == 0:
		if floor >= j.origin {
			out = append(out, Entry{Seq: floor, Gap: true, From: j.origin, To: floor})
		}
		after = floor
	case after >= j.next || after < floor:
		out = append(out, Entry{Seq: floor, Gap: true, From: after + 1, To: floor})
		after = floor
	}
	j.grewHanded = true
	grew := j.grew
	j.ring.copyAfter(c, after, limit-len(out))
	j.mu.Unlock()
	return c.appendTo(out), grew
}

// putCopied keeps c for the next read, unless a large read grew it.
func (j *Journal) putCopied(c *copied) {
	if cap(c.b) <= maxKeptBuffer {
		clear(c.pods)
		j.copies.Put(c)
	}
}

// Floor returns the number of the last entry dropped to keep the
// journal within its bounds: a reader resuming after an earlier number
// has missed events, and Read tells it with a gap.
func (j *Journal) Floor() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ring.floor
}

// Last returns the number of the latest entry.
func (j *Journal) Last() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next - 1
}

// Status is how the journal fares.
type Status struct {
	// Dir is the state directory; empty in memory.
	Dir string
	// Persistent tells that events are written to Dir.
	Persistent bool
	// Degraded says why they are not, although Dir is set.
	Degraded error
	// Recovery says what Open found.
	Recovery string
	// Events and Bytes are what is held for readers to resume from.
	Events int
	Bytes  int64
}

// String is the status in a line, for a health page.
func (s Status) String() string {
	held := fmt.Sprintf("%d entries (%d bytes) held", s.Events, s.Bytes)
	switch {
	case s.Dir == "":
		return "journal: in memory, " + held
	case s.Persistent:
		return fmt.Sprintf("journal: %s (%s at start), %s", s.Dir, s.Recovery, held)
	default:
		return fmt.Sprintf(
			"journal: DEGRADED to memory, a restart will lose what it holds: %v; %s at start; %s",
			s.Degraded,
			s.Recovery,
			held,
		)
	}
}

// Status returns the journal's status.
func (j *Journal) Status() Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Status{
		Dir: j.opts.Dir, Persistent: j.w != nil, Degraded: j.degraded, Recovery: j.recovery,
		Events: j.ring.n, Bytes: j.ring.bytes,
	}
}

// Close writes that the run stopped cleanly and closes the files. The
// journal stays readable, in memory.
func (j *Journal) Close() error {
	if j.stopSync != nil {
		close(j.stopSync)
		<-j.syncDone
		j.stopSync = nil
	}
	if j.stopBackground != nil {
		close(j.stopBackground)
		<-j.backgroundDone
		j.stopBackground = nil
	}
	if j.stopExpire != nil {
		close(j.stopExpire)
		<-j.expireDone
		j.stopExpire = nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if j.head != nil {
		_ = j.head.Close() // best effort: the disk failed already
	}
	if j.w == nil {
		return nil
	}
	err := j.w.closeCleanly(j.next - 1)
	j.w = nil
	return err
}

// syncLoop syncs what was written, every Sync period.
func (j *Journal) syncLoop() {
	defer close(j.syncDone)
	t := j.opts.Clock.NewTicker(j.opts.Sync)
	defer t.Stop()
	for {
		select {
		case <-j.stopSync:
			return
		case <-t.C():
		}
		j.syncWritten()
	}
}

// syncWritten syncs what was written since the last sync, and the head
// after it. A sync that fails leaves the journal in memory, as a write
// that fails does: what it was to make durable may never reach the disk,
// and a later sync would not say so (Linux drops the pages it could not
// write back, and tells of it once).
func (j *Journal) syncWritten() {
	j.mu.Lock()
	var f, head *os.File
	var dir bool
	last := j.next - 1
	if j.w != nil && j.w.dirty {
		f, head, dir, j.w.dirty, j.w.unsynced, j.w.dirUnsynced = j.w.seg, j.w.head, j.w.dirUnsynced, false, 0, false
		j.w.headAt = max(j.w.headAt, last)
	}
	j.mu.Unlock()
	if f == nil {
		return
	}
	// Outside the lock: a sync takes milliseconds, commits go on. A
	// segment closed meanwhile was synced as it closed. The head follows
	// what is synced: a store cut short by something else than a kill,
	// past that, is told as a gap.
	err := j.fsync(f)
	if err == nil && dir {
		err = syncDir(j.opts.Dir)
	}
	if err == nil {
		err = writeHead(head, last)
	}
	if err == nil || errors.Is(err, os.ErrClosed) {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.w != nil {
		j.degrade(fmt.Errorf("syncing %s: %w", j.opts.Dir, err))
		j.updateGauges()
	}
}

func (j *Journal) updateGauges() {
	j.metrics.events.Set(float64(j.ring.n))
	j.metrics.bytes.Set(float64(j.ring.bytes))
	var disk int64
	if j.w != nil {
		for _, s := range j.w.segments {
			disk += s.size
		}
	}
	j.metrics.diskBytes.Set(float64(disk))
	if j.opts.Dir != "" && j.w == nil {
		j.metrics.degraded.Set(1)
	} else {
		j.metrics.degraded.Set(0)
	}
}

// stamp names a set-aside store.
func (j *Journal) stamp() string { return j.opts.Clock.Now().UTC().Format("20060102T150405Z") }
