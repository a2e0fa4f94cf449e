// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/plegkit/pleg"
)

// requireRoot stops a test that mounts file systems where it cannot: it
// fails under CI, which runs as root, and skips elsewhere.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test mounts file systems and needs root")
	}
	t.Skip("this test mounts file systems and needs root")
}

func mount(t *testing.T, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := syscall.Mount(source, target, fstype, flags, data); err != nil {
		t.Fatalf("mount %s on %s: %v", source, target, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(target, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

// A state directory on a read-only file system: the journal goes on from
// what it reads there, in memory, and says so.
func TestReadOnlyDirectory(t *testing.T) {
	requireRoot(t)
	e := newEnv(t)
	j := e.open()
	commit(t, j, 0, 4)
	last := j.Last()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	mount(t, e.dir, e.dir, "", syscall.MS_BIND, "")
	if err := syscall.Mount("", e.dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", e.dir, err)
	}

	j = e.open()
	if o := e.outcome(j); o != OutcomeUnusable {
		t.Fatalf("outcome %s, want unusable", o)
	}
	if s := j.Status(); s.Persistent || !errors.Is(s.Degraded, syscall.EROFS) {
		t.Errorf("status %+v, want degraded by a read-only file system", s)
	}
	if !strings.Contains(e.logs.String(), "in memory only") {
		t.Errorf("the log does not say so:\n%s", e.logs.String())
	}
	if r, _ := j.Restore(); len(r.Pods) != 3 {
		t.Errorf("restored %d pods, want the 3 it read", len(r.Pods))
	}
	if got, _ := j.Read(last-1, 10); len(got) != 1 || got[0].Seq != last {
		t.Errorf("a reader at %d gets %s, want the last event", last-1, describe(got))
	}
	commit(t, j, 4, 1)
	if j.Last() <= last {
		t.Errorf("numbering at %d after %d", j.Last(), last)
	}
}

// A disk that fills up under a running journal: it goes on in memory,
// says so, and loses no event for its readers; the store it wrote stays
// sound for the next run, which tells the events it could not keep as a
// gap.
//
// With segments of 16 KiB, the disk fills while commits are copied to a
// mapped tail, preallocated 16 KiB at a time: the preallocation fails, and
// the write that follows tells the journal.
func TestDiskFull(t *testing.T) {
	for _, segment := range []int64{0, 16 << 10} {
		t.Run(fmt.Sprintf("segment=%d", segment), func(t *testing.T) { testDiskFull(t, segment) })
	}
}

func testDiskFull(t *testing.T, segment int64) {
	requireRoot(t)
	e := newEnv(t)
	mount(t, "tmpfs", e.dir, "tmpfs", 0, "size=96k")
	e.opts.Sync = SyncAlways
	e.opts.SegmentBytes = segment
	j := e.open()
	var failed error
	n := 0
	for ; failed == nil && n < 5000; n++ {
		ev := event(n)
		failed = j.Commit([]pleg.Event{ev}, []pleg.PodReport{report(ev.PodUID, ev.ContainerID)})
		if n == 0 && segment > 0 && (failed != nil || j.w.tail.mem == nil) {
			t.Fatalf("the first commit was not copied to a mapped tail: %v", failed)
		}
	}
	if !errors.Is(failed, syscall.ENOSPC) {
		t.Fatalf("after %d commits: %v, want no space left", n, failed)
	}
	if s := j.Status(); s.Persistent || s.Degraded == nil {
		t.Errorf("status %+v, want degraded", s)
	}
	written := j.Last() // the failed commit's event is kept, in memory
	commit(t, j, n, 10)
	if got := readAll(j, 0); len(got) != n+10 {
		t.Errorf("readers get %d events, want all %d", len(got), n+10)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	e.boot = "boot-1"
	j = e.open()
	if o := e.outcome(j); o != OutcomeKilled && o != OutcomeUnusable {
		t.Errorf("reopened: %s", o)
	}
	if r, _ := j.Restore(); len(r.Pods) != 3 {
		t.Errorf("restored %d pods from the full disk's store, want 3", len(r.Pods))
	}
	// The head, rewritten in place, kept counting: the numbers memory
	// held are a gap, and are not given again.
	if got, _ := j.Read(written-1, 10); len(got) != 1 || !got[0].Gap || got[0].To < written+10 {
		t.Errorf("a reader before the events only memory held gets %s, want a gap past %d", describe(got), written+10)
	}
	commit(t, j, 0, 1)
	if j.Last() <= written+10 {
		t.Errorf("numbering goes on at %d, among numbers given before", j.Last())
	}
}
