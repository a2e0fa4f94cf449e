// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// The journal's ID is made with its directory and kept across restarts,
// a store set aside included, so that (ID, seq) names one event for as
// long as the directory lives; a journal in memory has one of its own.
func TestIdentity(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	id := j.ID()
	if id == "" {
		t.Fatal("no ID")
	}
	commit(t, j, 0, 3)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(e.dir, idName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the ID file is %v, want 0600", fi.Mode().Perm())
	}
	j2 := e.open()
	if got := j2.ID(); got != id {
		t.Errorf("after a restart the ID is %q, want %q", got, id)
	}
	if err := j2.Close(); err != nil {
		t.Fatal(err)
	}
	// A damaged store is set aside; the directory, and its ID, stay.
	segs := e.segments()
	if err := os.WriteFile(segs[len(segs)-1], []byte("not a segment at all, not even its header"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.boot = "boot-2"
	j3 := e.open()
	if got, outcome := j3.ID(), e.outcome(j3); got != id || outcome != OutcomeCorrupt {
		t.Errorf("after a store was set aside (%s, want %s) the ID is %q, want %q", outcome, OutcomeCorrupt, got, id)
	}

	for _, tc := range []struct {
		name, content string
	}{
		{"empty", ""},
		{"spaces", "two words"},
		{"binary", "\x00\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if err := os.WriteFile(filepath.Join(e.dir, idName), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			j := e.open()
			if j.ID() == "" || j.ID() == tc.content {
				t.Errorf("a bad ID file gave %q", j.ID())
			}
		})
	}

	// A second journal on the directory, which the first holds, is in
	// memory: its numbers are its own, and so is its ID.
	if other := e.open(); other.ID() == id || other.Status().Persistent {
		t.Errorf("a journal on a directory in use: ID %q (the directory's is %q), persistent %v",
			other.ID(), id, other.Status().Persistent)
	}

	a, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() == "" || a.ID() == b.ID() {
		t.Errorf("journals in memory have IDs %q and %q, want two", a.ID(), b.ID())
	}
}

// Floor tells the last number dropped by the bounds.
func TestFloor(t *testing.T) {
	e := newEnv(t)
	e.opts.MaxEvents = 2
	j := e.open()
	commit(t, j, 0, 5)
	if got, want := j.Floor(), j.Last()-2; got != want {
		t.Errorf("Floor = %d, want %d (last %d, 2 kept)", got, want, j.Last())
	}
}
