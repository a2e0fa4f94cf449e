// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/plegkit/pleg"
)

var testNow = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// env opens journals on one directory, as successive runs of a daemon.
type env struct {
	t     *testing.T
	dir   string
	boot  string
	opts  Options
	clock *testingclock.FakeClock
	reg   *prometheus.Registry
	logs  *strings.Builder
}

func newEnv(t *testing.T) *env {
	return &env{t: t, dir: t.TempDir(), boot: "boot-1", clock: testingclock.NewFakeClock(testNow)}
}

// open opens the journal as a new run would.
func (e *env) open() *Journal {
	e.t.Helper()
	o := e.opts
	o.Dir, o.BootID, o.Clock = e.dir, e.boot, e.clock
	e.reg, e.logs = prometheus.NewRegistry(), &strings.Builder{}
	o.Registerer, o.Logger = e.reg, slog.New(slog.NewTextHandler(e.logs, nil))
	j, err := Open(o)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.t.Cleanup(func() { _ = j.Close() })
	return j
}

func (e *env) outcome(j *Journal) string {
	e.t.Helper()
	for _, o := range []string{OutcomeNew, OutcomeClean, OutcomeKilled, OutcomeCrashed, OutcomeTruncated, OutcomeCorrupt, OutcomeNewer, OutcomeUnusable, OutcomeOtherRuntime, OutcomeUnconfirmedRuntime} {
		if testutil.ToFloat64(j.metrics.recoveries.WithLabelValues(o)) == 1 {
			if j.Status().Recovery != o {
				e.t.Errorf("status says %q, metric %q", j.Status().Recovery, o)
			}
			return o
		}
	}
	return ""
}

// segments returns the paths of the store's segments, oldest first.
func (e *env) segments() []string {
	names, err := listSegments(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Join(e.dir, names[i])
	}
	return names
}

func event(i int) pleg.Event {
	return pleg.Event{
		Type: pleg.ContainerStarted, PodUID: fmt.Sprintf("pod-%d", i%3), PodName: "web", PodNamespace: "shop",
		ContainerID: fmt.Sprintf("c-%d", i), ContainerName: "nginx", Observed: testNow.Add(time.Duration(i) * time.Second),
	}
}

func report(uid string, ids ...string) pleg.PodReport {
	p := pleg.PodReport{UID: uid, Name: "web", Namespace: "shop"}
	for _, id := range ids {
		p.Items = append(p.Items, pleg.ItemReport{ID: id, Name: "nginx", State: pleg.ItemRunning})
	}
	return p
}

// commit commits n events, one a batch, each with its pod's report.
func commit(t *testing.T, j *Journal, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		ev := event(i)
		if err := j.Commit([]pleg.Event{ev}, []pleg.PodReport{report(ev.PodUID, ev.ContainerID)}); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}
}

// readAll reads everything after `after`.
func readAll(j *Journal, after uint64) []Entry {
	var out []Entry
	for {
		batch, _ := j.Read(after, 100)
		if len(batch) == 0 {
			return out
		}
		out = append(out, batch...)
		after = batch[len(batch)-1].Seq
		if batch[len(batch)-1].Gap && batch[len(batch)-1].From > batch[len(batch)-1].To {
			// An ahead gap moves the cursor back: read on from it once.
			rest, _ := j.Read(after, 1<<20)
			return append(out, rest...)
		}
	}
}

func describe(entries []Entry) string {
	var parts []string
	for _, e := range entries {
		if e.Gap {
			parts = append(parts, fmt.Sprintf("gap(%d..%d)", e.From, e.To))
		} else {
			parts = append(parts, fmt.Sprintf("%d:%s", e.Seq, e.Event.ContainerID))
		}
	}
	return strings.Join(parts, " ")
}

func TestMemoryJournalReads(t *testing.T) {
	clock := testingclock.NewFakeClock(testNow)
	j, err := Open(Options{MaxEvents: 4, Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	first := uint64(testNow.UnixMicro())
	if got := j.Last(); got != first-1 {
		t.Fatalf("Last of an empty journal: %d, want %d", got, first-1)
	}
	_, grew := j.Read(j.Last(), 10)
	commit(t, j, 0, 6)
	select {
	case <-grew:
	default:
		t.Error("grew not closed by a commit")
	}
	for _, tc := range []struct {
		name  string
		after uint64
		want  string
	}{
		{"since 0, the ring moved on", 0, fmt.Sprintf("gap(%d..%d) %d:c-2 %d:c-3 %d:c-4 %d:c-5", first, first+1, first+2, first+3, first+4, first+5)},
		{"within the ring", first + 3, fmt.Sprintf("%d:c-4 %d:c-5", first+4, first+5)},
		{"at the end", first + 5, ""},
		{"behind the ring", first, fmt.Sprintf("gap(%d..%d) %d:c-2 %d:c-3 %d:c-4 %d:c-5", first+1, first+1, first+2, first+3, first+4, first+5)},
		{"ahead, from another run", first + 100, fmt.Sprintf("gap(%d..%d) %d:c-2 %d:c-3 %d:c-4 %d:c-5", first+101, first+1, first+2, first+3, first+4, first+5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := j.Read(tc.after, 100)
			if s := describe(got); s != tc.want {
				t.Errorf("Read(%d):\n got  %s\n want %s", tc.after, s, tc.want)
			}
		})
	}
	if s := j.Status(); s.Events != 4 || s.Persistent || s.Dir != "" {
		t.Errorf("status %+v, want 4 events in memory", s)
	}
}

func TestRetentionByBytes(t *testing.T) {
	ev := event(0)
	size := int64(len(appendEvent(nil, &ev, nil)))
	j, err := Open(Options{MaxBytes: 3 * size, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, j, 0, 10)
	if s := j.Status(); s.Events != 3 || s.Bytes > 3*size {
		t.Errorf("status %+v, want 3 events within %d bytes", s, 3*size)
	}
}

// A run that stops cleanly leaves everything to the next: the same
// numbers, the same events, the pods as reported, and no gap.
func TestCleanRestart(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	if o := e.outcome(j); o != OutcomeNew {
		t.Errorf("first open: %s, want new", o)
	}
	commit(t, j, 0, 5)
	before := readAll(j, 0)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	e.boot = "boot-2" // a clean stop survives a reboot too
	j = e.open()
	if o := e.outcome(j); o != OutcomeClean {
		t.Errorf("outcome %s, want clean", o)
	}
	if got := readAll(j, 0); describe(got) != describe(before) {
		t.Errorf("after restart:\n got  %s\n want %s", describe(got), describe(before))
	}
	restored, _ := j.Restore()
	pods := restored.Pods
	slices.SortFunc(pods, func(a, b pleg.PodReport) int { return strings.Compare(a.UID, b.UID) })
	if len(pods) != 3 || pods[0].UID != "pod-0" || pods[0].Items[0].ID != "c-3" {
		t.Errorf("restored %+v, want pods 0..2, pod-0 last with c-3", pods)
	}
	if again, _ := j.Restore(); len(again.Pods) != 0 {
		t.Errorf("second Restore returned %d pods, want none", len(again.Pods))
	}
	last := j.Last()
	commit(t, j, 5, 1)
	if got := j.Last(); got != last+1 {
		t.Errorf("numbering went from %d to %d, want +1", last, got)
	}
}

// A killed run (no Close) in the same boot loses nothing: the kernel kept
// its writes. A write it did not finish was never readable and is dropped.
func TestKilledRestart(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			e := newEnv(t)
			j := e.open()
			commit(t, j, 0, 5)
			want := describe(readAll(j, 0))
			last := j.Last()
			j.w.close() // killed: nothing more written
			if torn {
				rec := appendBatch(nil, last+1, []pleg.Event{event(9)}, nil)
				appendTo(t, e.segments()[len(e.segments())-1], rec[:len(rec)-3])
			}
			j = e.open()
			if o := e.outcome(j); o != OutcomeKilled {
				t.Errorf("outcome %s, want killed", o)
			}
			if got := describe(readAll(j, 0)); got != want {
				t.Errorf("after restart:\n got  %s\n want %s", got, want)
			}
			if got, _ := j.Read(last, 10); len(got) != 0 {
				t.Errorf("a client at %d gets %s, want nothing", last, describe(got))
			}
			commit(t, j, 5, 1)
			if got := j.Last(); got != last+1 {
				t.Errorf("numbering went on at %d, want %d", got, last+1)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			// The torn tail was cut: the store reads clean.
			if j = e.open(); e.outcome(j) != OutcomeClean {
				t.Errorf("third open: %s, want clean", e.outcome(j))
			}
		})
	}
}

// A machine that went down under a running journal may have lost what it
// wrote since its last sync: readers are told of a gap up to the last
// reservation, and numbering goes on past it.
func TestCrashRestart(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	commit(t, j, 0, 5)
	last := j.Last()
	end := j.w.segments[len(j.w.segments)-1].size
	j.w.close()
	// The last commit did not reach the disk: the pages of the file's
	// preallocated tail read as zeros.
	segs := e.segments()
	zeroRange(t, segs[len(segs)-1], end-50, end)

	e.boot = "boot-2"
	j = e.open()
	if o := e.outcome(j); o != OutcomeCrashed {
		t.Fatalf("outcome %s, want crashed", o)
	}
	got, _ := j.Read(last, 10)
	// The last commit is lost, and maybe more was given out: up to the
	// reservation.
	if len(got) != 1 || !got[0].Gap || got[0].From != last || got[0].To < last {
		t.Errorf("a client at %d gets %s, want a gap from %d to the reservation", last, describe(got), last)
	}
	commit(t, j, 5, 1)
	if j.Last() <= got[0].To {
		t.Errorf("numbering went on at %d, inside the gap", j.Last())
	}
	// The gap is kept: the next run still tells it.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = e.open()
	if got, _ := j.Read(last-1, 10); len(got) != 2 || !got[0].Gap || got[1].Event.ContainerID != "c-5" {
		t.Errorf("after another restart, from %d: %s; want the gap, then c-5", last-1, describe(got))
	}
}

// A store whose head says more was committed than it holds lost events,
// whatever cut them: readers are told.
func TestTruncatedStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, path string, records []int64)
	}{
		{"at a record boundary", func(t *testing.T, path string, records []int64) { truncateTo(t, path, records[len(records)-3]) }},
		{"inside a record", func(t *testing.T, path string, records []int64) { truncateTo(t, path, records[len(records)-3]+5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			j := e.open()
			commit(t, j, 0, 6)
			last := j.Last()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			seg := e.segments()[len(e.segments())-1]
			tc.cut(t, seg, recordOffsets(t, seg))
			j = e.open()
			if o := e.outcome(j); o != OutcomeTruncated {
				t.Fatalf("outcome %s, want truncated", o)
			}
			got := readAll(j, 0)
			if n := len(got); n == 0 || !got[n-1].Gap || got[n-1].To != last {
				t.Errorf("read %s, want events then a gap to %d", describe(got), last)
			}
		})
	}
}

// A store that cannot be trusted is set aside: a new one starts, numbered
// past the old, and a reader of the old store gets a gap.
func TestUntrustedStoreIsSetAside(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, e *env)
		outcome string
	}{
		{"a flipped byte in an old segment", func(t *testing.T, e *env) { flipByte(t, e.segments()[0], headerSize+20) }, OutcomeCorrupt},
		{"a flipped byte in the last record, same boot", func(t *testing.T, e *env) {
			segs := e.segments()
			flipByte(t, segs[len(segs)-1], -3)
		}, OutcomeCorrupt},
		{"garbage for a segment", func(t *testing.T, e *env) {
			writeFile(t, e.segments()[0], []byte("hello, world, this is not a journal"))
		}, OutcomeCorrupt},
		{"a newer format", func(t *testing.T, e *env) {
			h := header()
			h[8] = formatVersion + 1
			h = append(h[:12], 0, 0, 0, 0)
			copy(h[12:], crcBytes(h[:12]))
			writeFile(t, filepath.Join(e.dir, segmentName(99)), appendCheckpoint(h, &checkpoint{origin: 1, next: 1}))
		}, OutcomeNewer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.opts.SegmentBytes = 300 // a few segments
			j := e.open()
			commit(t, j, 0, 8)
			last := j.Last()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if len(e.segments()) < 2 {
				t.Fatalf("want several segments, have %d", len(e.segments()))
			}
			tc.damage(t, e)
			j = e.open()
			if o := e.outcome(j); o != tc.outcome {
				t.Fatalf("outcome %s, want %s", o, tc.outcome)
			}
			if !strings.Contains(e.logs.String(), "moved aside") {
				t.Errorf("log does not say the store was moved aside:\n%s", e.logs.String())
			}
			if r, _ := j.Restore(); len(r.Pods) != 0 {
				t.Errorf("restored %d pods from a store set aside", len(r.Pods))
			}
			got, _ := j.Read(last, 10)
			if len(got) != 1 || !got[0].Gap || got[0].From != last+1 {
				t.Errorf("a reader of the old store gets %s, want a gap", describe(got))
			}
			if j.Last() < last {
				t.Errorf("new numbers start at %d, before the old store's %d", j.Last()+1, last)
			}
			aside, _ := os.ReadDir(filepath.Join(e.dir, setAsideName))
			if len(aside) != 1 {
				t.Errorf("%d stores set aside, want 1", len(aside))
			}
			commit(t, j, 8, 1)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if j = e.open(); e.outcome(j) != OutcomeClean {
				t.Errorf("the new store reopens %s, want clean", e.outcome(j))
			}
		})
	}
}

// Retention deletes whole segments; the store stays readable, from a
// checkpoint, and a reader from the start is told what went.
func TestRetentionDeletesSegments(t *testing.T) {
	e := newEnv(t)
	e.opts.MaxEvents, e.opts.SegmentBytes = 10, 400
	j := e.open()
	commit(t, j, 0, 200)
	if n := len(e.segments()); n > 6 {
		t.Errorf("%d segments for 10 events kept, want a few", n)
	}
	want := describe(readAll(j, 0))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = e.open()
	if got := describe(readAll(j, 0)); got != want {
		t.Errorf("after restart:\n got  %s\n want %s", got, want)
	}
	if !strings.HasPrefix(want, "gap(") {
		t.Errorf("read from 0: %s, want a gap first", want)
	}
	r, _ := j.Restore()
	if len(r.Pods) != 3 {
		t.Errorf("restored %d pods, want 3", len(r.Pods))
	}
}

// A directory that another pleg holds, or that cannot be written, leaves
// the journal in memory, going on from what it can read.
func TestDirectoryInUse(t *testing.T) {
	e := newEnv(t)
	first := e.open()
	commit(t, first, 0, 3)
	second := e.open()
	if o := e.outcome(second); o != OutcomeUnusable {
		t.Fatalf("outcome %s, want unusable", o)
	}
	s := second.Status()
	if s.Persistent || s.Degraded == nil || !strings.Contains(s.String(), "DEGRADED") {
		t.Errorf("status %+v (%s), want degraded", s, s)
	}
	if testutil.ToFloat64(second.metrics.degraded) != 1 {
		t.Error("pleg_journal_degraded is not 1")
	}
	if r, _ := second.Restore(); len(r.Pods) != 3 {
		t.Errorf("restored %d pods, want the 3 it could read", len(r.Pods))
	}
	commit(t, second, 3, 1)
	if second.Last() <= first.Last() {
		t.Errorf("in memory, numbering at %d does not pass the store's %d", second.Last(), first.Last())
	}
}

func TestSyncAlwaysLeavesNothingDirty(t *testing.T) {
	e := newEnv(t)
	e.opts.Sync = SyncAlways
	j := e.open()
	commit(t, j, 0, 3)
	if j.w.dirty {
		t.Error("segment dirty after a commit with SyncAlways")
	}
}

func TestSyncPeriod(t *testing.T) {
	e := newEnv(t)
	e.opts.Sync = time.Second
	j := e.open()
	commit(t, j, 0, 3)
	// The sync loop's ticker is the fake clock's: step until it has run.
	for dirty := true; dirty; {
		e.clock.Step(time.Second)
		j.mu.Lock()
		dirty = j.w.dirty
		j.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// Test helpers that damage files.

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func zeroRange(t *testing.T, path string, from, to int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
		t.Fatal(err)
	}
}

func truncateTo(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, at int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at += len(data)
	}
	data[at] ^= 0xff
	writeFile(t, path, data)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// recordOffsets returns where each record of a segment starts.
func recordOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for off := headerSize; off < len(data); {
		_, n, err := nextRecord(data[off:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, off, err)
		}
		out = append(out, int64(off))
		off += n
	}
	return out
}

func crcBytes(b []byte) []byte {
	var out [4]byte
	binary.LittleEndian.PutUint32(out[:], crc32.Checksum(b, castagnoli))
	return out[:]
}

// A checkpoint larger than a segment (many pods, small segments) does not
// make every commit start a segment.
func TestLargeCheckpointDoesNotRotateEveryCommit(t *testing.T) {
	e := newEnv(t)
	e.opts.SegmentBytes = 1000
	j := e.open()
	var pods []pleg.PodReport
	for i := range 200 {
		pods = append(pods, report(fmt.Sprintf("pod-%03d", i), "a", "b"))
	}
	if err := j.Commit(nil, pods); err != nil {
		t.Fatal(err)
	}
	commit(t, j, 0, 1) // the first segment fills up: the next starts with all 200 pods
	before := len(e.segments())
	commit(t, j, 1, 5)
	if n := len(e.segments()); n > before+1 {
		t.Errorf("%d segments after 5 small commits, from %d: a checkpoint counts against its segment", n, before)
	}
}

// A periodic sync that fails leaves the journal in memory, as a failed
// write does: what it was to make durable may never reach the disk, and
// a later sync would not tell. Readers lose nothing, and the next run
// gives none of this run's numbers again.
func TestFailedSyncLeavesTheJournalInMemory(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	commit(t, j, 0, 3)
	j.fsync = func(*os.File) error { return syscall.EIO }
	j.syncWritten()
	s := j.Status()
	if s.Persistent || !errors.Is(s.Degraded, syscall.EIO) {
		t.Fatalf("status %+v, want degraded by the failed sync", s)
	}
	if testutil.ToFloat64(j.metrics.degraded) != 1 {
		t.Error("pleg_journal_degraded is not 1")
	}
	if !strings.Contains(e.logs.String(), "cannot write to its directory") {
		t.Errorf("nothing logged of it:\n%s", e.logs)
	}
	commit(t, j, 3, 2)
	if got := readAll(j, 0); len(got) != 5 {
		t.Errorf("readers get %s, want all 5 events", describe(got))
	}
	last := j.Last()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = e.open()
	commit(t, j, 5, 1)
	if j.Last() <= last {
		t.Errorf("the next run numbered an event %d, given out already (up to %d)", j.Last(), last)
	}
}
