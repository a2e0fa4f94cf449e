// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg"
)

// batchOf is n events, each with its pod's report, for one commit.
func batchOf(n int) ([]pleg.Event, []pleg.PodReport) {
	var events []pleg.Event
	var pods []pleg.PodReport
	for i := range n {
		ev := event(i)
		events = append(events, ev)
		pods = append(pods, report(ev.PodUID, ev.ContainerID))
	}
	return events, pods
}

// reopenKilled opens the journal after a run was killed, and checks that
// it says so and holds what the killed run held, want.
func reopenKilled(t *testing.T, e *env, want string) *Journal {
	t.Helper()
	j := e.open()
	if o := e.outcome(j); o != OutcomeKilled {
		t.Errorf("outcome %s, want killed", o)
	}
	if got := describe(readAll(j, 0)); got != want {
		t.Errorf("after restart:\n got  %s\n want %s", got, want)
	}
	return j
}

// fileSize is the size of the file at path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// What a killed run leaves in its mapped tail: the records, then zeros,
// or a commit copied but for its length. The next run reads the records,
// loses none of them and reports nothing of the unfinished commit.
func TestKilledWithMappedTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after writes, at the end of the records, what the kill left.
		after     func(t *testing.T, path string, end int64, next uint64)
		dropped   bool
		wantInLog string
	}{
		{"zeros after the records", func(*testing.T, string, int64, uint64) {}, false, ""},
		{"a commit copied but for its length", func(t *testing.T, path string, end int64, next uint64) {
			rec := appendBatch(nil, next, []pleg.Event{event(9)}, nil)
			clear(rec[:4])
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			if _, err := f.WriteAt(rec, end); err != nil {
				t.Fatal(err)
			}
		}, true, "droppedIncompleteWrite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			j := e.open()
			commit(t, j, 0, 5)
			if j.w.tail.mem == nil {
				t.Fatal("the segment's tail is not mapped")
			}
			want := describe(readAll(j, 0))
			last := j.Last()
			end := j.w.segments[len(j.w.segments)-1].size
			j.w.close() // killed: nothing more written
			seg := e.segments()[len(e.segments())-1]
			if size := fileSize(t, seg); size <= end {
				t.Fatalf("the segment is %d bytes, its records %d: want its preallocated tail after them", size, end)
			}
			tc.after(t, seg, end, last+1)

			j = e.open()
			if o := e.outcome(j); o != OutcomeKilled {
				t.Errorf("outcome %s, want killed", o)
			}
			if got := describe(readAll(j, 0)); got != want {
				t.Errorf("after restart:\n got  %s\n want %s", got, want)
			}
			if logged := strings.Contains(e.logs.String(), "droppedIncompleteWrite"); logged != tc.dropped {
				t.Errorf("the log tells a dropped write: %v, want %v:\n%s", logged, tc.dropped, e.logs.String())
			}
			if size := fileSize(t, seg); size != end {
				t.Errorf("the killed run's segment is %d bytes after the restart, want it cut at its records' %d", size, end)
			}
			commit(t, j, 5, 1)
			if got := j.Last(); got != last+1 {
				t.Errorf("numbering went on at %d, want %d", got, last+1)
			}
		})
	}
}

// A journal stopped cleanly, and a segment done with, hold no zeros: the
// preallocated tail is cut, on disk as in the segment's size.
func TestFinishedSegmentsHoldNoTail(t *testing.T) {
	e := newEnv(t)
	e.opts.SegmentBytes = 300 // a few segments
	j := e.open()
	commit(t, j, 0, 12)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs := e.segments()
	if len(segs) < 3 {
		t.Fatalf("want several segments, have %d", len(segs))
	}
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		off := headerSize
		for off < len(data) {
			_, n, err := nextRecord(data[off:])
			if err != nil {
				t.Fatalf("%s at %d of %d bytes: %v", seg, off, len(data), err)
			}
			off += n
		}
	}
	if j = e.open(); e.outcome(j) != OutcomeClean {
		t.Errorf("reopened %s, want clean", e.outcome(j))
	}
}

// A batch larger than what is left mapped maps more of the file, and one
// larger than a whole chunk still goes in one piece.
func TestCommitLargerThanTheTail(t *testing.T) {
	e := newEnv(t)
	e.opts.SegmentBytes = 64 << 10 // chunks of 16 KiB
	j := e.open()
	events, pods := batchOf(400) // about 40 KiB
	commit(t, j, 0, 3)
	if err := j.Commit(events, pods); err != nil {
		t.Fatal(err)
	}
	if j.w.noTail || j.w.tail.mem == nil {
		t.Fatal("the large batch was written, not copied to a mapped tail")
	}
	commit(t, j, 400, 3)
	want := describe(readAll(j, 0))
	j.w.close() // killed
	reopenKilled(t, e, want)
}

// A commit that fills a segment with more than a commit should wait to
// sync returns before the rotation; background syncs the segment and
// starts the next, and nothing is lost on the way.
func TestFullSegmentRotatedOffTheCommitPath(t *testing.T) {
	e := newEnv(t)
	e.opts.SegmentBytes = 64 << 10
	j := e.open()
	events, pods := batchOf(4000) // about 400 KiB
	if err := j.Commit(events, pods); err != nil {
		t.Fatal(err)
	}
	// Commits go on while the rotation is due, and one after it; the loop
	// waits on the rotation's progress, not on a time.
	n := 4000
	for {
		commit(t, j, n, 1)
		n++
		j.mu.Lock()
		segs := len(j.w.segments)
		j.mu.Unlock()
		if segs == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	commit(t, j, n, 1)
	want := describe(readAll(j, 0))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = e.open()
	if o := e.outcome(j); o != OutcomeClean {
		t.Errorf("outcome %s, want clean", o)
	}
	if got := describe(readAll(j, 0)); got != want {
		t.Errorf("after restart, %d entries; want %d", len(strings.Fields(got)), len(strings.Fields(want)))
	}
}

// Where no tail maps (a file system mappable refuses), commits are written
// with write(2), and a killed run's store reads the same.
func TestWrittenWhereNoTailMaps(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	j.mu.Lock()
	j.w.cannotMap, j.w.noTail = true, true
	j.mu.Unlock()
	commit(t, j, 0, 5)
	if j.w.tail.mem != nil {
		t.Fatal("a tail was mapped")
	}
	want := describe(readAll(j, 0))
	end := j.w.segments[len(j.w.segments)-1].size
	j.w.close() // killed
	if size := fileSize(t, e.segments()[len(e.segments())-1]); size != end {
		t.Errorf("the segment is %d bytes, its records %d: want nothing after them", size, end)
	}
	reopenKilled(t, e, want)
}

// A segment cut short under its mapped tail, by another process or a file
// system gone read-only, faults on the next copy: the journal is told, and
// goes on in memory, as after a failed write; nothing readers saw is lost,
// and the process lives.
func TestTailCutUnderTheJournal(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	commit(t, j, 0, 3)
	if j.w.tail.mem == nil {
		t.Fatal("the segment's tail is not mapped")
	}
	if err := os.Truncate(e.segments()[len(e.segments())-1], 0); err != nil {
		t.Fatal(err)
	}
	ev := event(3)
	err := j.Commit([]pleg.Event{ev}, []pleg.PodReport{report(ev.PodUID, ev.ContainerID)})
	if err == nil || !strings.Contains(err.Error(), "mapped tail") {
		t.Fatalf("commit on a cut segment: %v, want the fault as an error", err)
	}
	if s := j.Status(); s.Persistent || s.Degraded == nil {
		t.Errorf("status %+v, want degraded to memory", s)
	}
	commit(t, j, 4, 2)
	if got := readAll(j, 0); len(got) != 6 {
		t.Errorf("readers get %s, want all 6 events", describe(got))
	}
}
