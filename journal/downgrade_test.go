// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A downgrade: an older pleg opens a store a newer one went on with (its
// last segment in a format this pleg does not know). It says what it
// cannot read and that it moved it aside, loses nothing of it (every
// file moved byte for byte, kept through later restarts), tells readers
// resuming from the old store a gap, and never numbers an event again
// with a number the newer pleg gave.
func TestDowngradeKeepsWhatItCannotRead(t *testing.T) {
	e := newEnv(t)
	e.opts.SegmentBytes = 300 // a few segments
	j := e.open()
	commit(t, j, 0, 8)
	last := j.Last()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// The newer pleg's segment: this format's records under the next
	// format's header, as an upgrade leaves the older segments before it.
	segs := e.segments()
	if len(segs) < 2 {
		t.Fatalf("want several segments, have %d", len(segs))
	}
	newest := segs[len(segs)-1]
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(data[8:], formatVersion+1)
	copy(data[12:16], crcBytes(data[:12]))
	writeFile(t, newest, data)
	before := storeFiles(t, e.dir)

	j = e.open()
	if o := e.outcome(j); o != OutcomeNewer {
		t.Fatalf("outcome %s, want %s", o, OutcomeNewer)
	}
	logs := e.logs.String()
	for _, want := range []string{
		"written by a newer pleg",
		fmt.Sprintf("reads format versions 1 to %d", formatVersion),
		fmt.Sprintf("format version %d, this pleg reads %d", formatVersion+1, formatVersion),
		"moved aside, whole and unread", "movedTo=",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
	aside, err := os.ReadDir(filepath.Join(e.dir, setAsideName))
	if err != nil || len(aside) != 1 {
		t.Fatalf("set-aside holds %v (%v), want the store", aside, err)
	}
	moved := storeFiles(t, filepath.Join(e.dir, setAsideName, aside[0].Name()))
	for name, b := range before {
		if !bytes.Equal(moved[name], b) {
			t.Errorf("%s: not moved aside as it was (%d bytes, then %d)", name, len(b), len(moved[name]))
		}
	}
	if len(moved) != len(before) {
		t.Errorf("moved aside %d files, the store had %d", len(moved), len(before))
	}
	if r, _ := j.Restore(); len(r.Pods) != 0 {
		t.Errorf("restored %d pods from a store it cannot read", len(r.Pods))
	}
	if got, _ := j.Read(last, 10); len(got) != 1 || !got[0].Gap || got[0].From != last+1 {
		t.Errorf("a reader resuming at %d gets %s, want a gap", last, describe(got))
	}
	commit(t, j, 8, 1)
	if j.Last() <= last {
		t.Errorf("the first event after the downgrade is %d, not past the newer pleg's %d", j.Last(), last)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarts of the older pleg go on with its own store and keep the
	// one set aside as it was.
	for range 2 {
		j = e.open()
		if o := e.outcome(j); o != OutcomeClean {
			t.Errorf("a restart after the downgrade: %s, want %s", o, OutcomeClean)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	again := storeFiles(t, filepath.Join(e.dir, setAsideName, aside[0].Name()))
	for name, b := range before {
		if !bytes.Equal(again[name], b) {
			t.Errorf("%s: changed in set-aside after restarts", name)
		}
	}
}

// storeFiles reads the segments and the head of a store.
func storeFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, en := range entries {
		if n := en.Name(); strings.HasSuffix(n, segExt) || n == headName {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			out[n] = b
		}
	}
	return out
}
