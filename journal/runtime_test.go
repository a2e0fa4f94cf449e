// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRuntimeSame(t *testing.T) {
	containerd := Runtime{Endpoint: "unix:///run/containerd/containerd.sock", Name: "containerd", Version: "v2.1.4"}
	for _, tc := range []struct {
		name string
		o    Runtime
		want bool
	}{
		{"itself", containerd, true},
		{"upgraded", Runtime{Endpoint: containerd.Endpoint, Name: "containerd", Version: "v2.2.0"}, true},
		{"name unknown", Runtime{Endpoint: containerd.Endpoint}, true},
		{"nothing known", Runtime{}, true},
		{"CRI-O on the same socket", Runtime{Endpoint: containerd.Endpoint, Name: "cri-o", Version: "1.33.0"}, false},
		{"another containerd", Runtime{Endpoint: "unix:///tmp/containerd-test/containerd.sock", Name: "containerd"}, false},
		{"another endpoint, name unknown", Runtime{Endpoint: "unix:///run/crio/crio.sock"}, false},
	} {
		if got := containerd.Same(tc.o); got != tc.want || tc.o.Same(containerd) != tc.want {
			t.Errorf("%s: Same = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A store written over one runtime and opened over another (the issue 31
// node: /var/lib/pleg left by a hand-run pleg over a simulator, or a node
// moved from containerd to CRI-O) is set aside unread: none of its
// containers is restored, readers resuming from it get a gap, and the log
// names both runtimes. The same runtime, upgraded, goes on from its store.
func TestStoreOfAnotherRuntimeIsSetAside(t *testing.T) {
	a1 := Runtime{Endpoint: "unix:///run/a.sock", Name: "runtime-a", Version: "1.0"}
	a2 := Runtime{Endpoint: "unix:///run/a.sock", Name: "runtime-a", Version: "1.1"}
	b := Runtime{Endpoint: "unix:///run/a.sock", Name: "runtime-b", Version: "1.0"}

	e := newEnv(t)
	e.opts.Runtime = a1
	j := e.open()
	commit(t, j, 0, 6)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// Upgraded: the same runtime.
	e.opts.Runtime = a2
	j = e.open()
	if o := e.outcome(j); o != OutcomeClean {
		t.Fatalf("over the upgraded runtime: outcome %s, want clean", o)
	}
	if r, _ := j.Restore(); len(r.Pods) != 3 {
		t.Errorf("over the upgraded runtime: restored %d pods, want 3", len(r.Pods))
	}
	commit(t, j, 6, 2)
	last := j.Last()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// Another runtime.
	e.opts.Runtime = b
	j = e.open()
	if o := e.outcome(j); o != OutcomeOtherRuntime {
		t.Fatalf("over another runtime: outcome %s, want %s", o, OutcomeOtherRuntime)
	}
	if r, _ := j.Restore(); len(r.Pods) != 0 || len(r.Removed) != 0 {
		t.Errorf("over another runtime: restored %d pods and %d removals, want none", len(r.Pods), len(r.Removed))
	}
	got := readAll(j, last)
	if len(got) != 1 || !got[0].Gap || got[0].From != last+1 {
		t.Errorf("a reader resuming from the other runtime's store gets %s, want a gap", describe(got))
	}
	if all := readAll(j, 0); strings.Contains(describe(all), ":c-") {
		t.Errorf("the other runtime's events are readable: %s", describe(all))
	}
	logs := e.logs.String()
	for _, want := range []string{"another runtime", "runtime-a 1.1 at unix:///run/a.sock", "runtime-b 1.0 at unix:///run/a.sock", "moved aside"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
	aside, _ := os.ReadDir(filepath.Join(e.dir, setAsideName))
	if len(aside) != 1 || !strings.HasSuffix(aside[0].Name(), "-"+OutcomeOtherRuntime) {
		t.Errorf("set aside: %v, want one store named for %s", aside, OutcomeOtherRuntime)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// The new store is runtime B's.
	if j = e.open(); e.outcome(j) != OutcomeClean {
		t.Errorf("B's store reopens %s over B, want clean", e.outcome(j))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	e.opts.Runtime = Runtime{Endpoint: "unix:///run/other.sock"} // name unknown, endpoint differs
	if j = e.open(); e.outcome(j) != OutcomeOtherRuntime {
		t.Errorf("B's store over another endpoint: %s, want %s\n%s", e.outcome(j), OutcomeOtherRuntime, e.logs.String())
	}
}

// A runtime that does not say who it is at start cannot vouch for a store
// that names a runtime: it is set aside. One whose endpoint is known
// keeps its store's name for the next run.
func TestStoreOverAnUnconfirmedRuntime(t *testing.T) {
	e := newEnv(t)
	e.opts.Runtime = Runtime{Endpoint: "unix:///run/a.sock", Name: "runtime-a", Version: "1.0"}
	j := e.open()
	commit(t, j, 0, 3)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Told nothing of the runtime (an embedder's): taken as it is, and
	// the runtime the store names is kept.
	e.opts.Runtime = Runtime{}
	j = e.open()
	if o := e.outcome(j); o != OutcomeClean {
		t.Fatalf("with no runtime told: %s, want clean", o)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	e.opts.Runtime, e.opts.RuntimeUnconfirmed = Runtime{Endpoint: "unix:///run/a.sock"}, true
	j = e.open()
	if o := e.outcome(j); o != OutcomeUnconfirmedRuntime {
		t.Fatalf("over a runtime that did not answer: %s, want %s", o, OutcomeUnconfirmedRuntime)
	}
	if r, _ := j.Restore(); len(r.Pods) != 0 {
		t.Errorf("restored %d pods of an unconfirmed runtime", len(r.Pods))
	}
	if !strings.Contains(e.logs.String(), "runtime-a 1.0 at unix:///run/a.sock") {
		t.Errorf("the log does not name the store's runtime:\n%s", e.logs.String())
	}
}

// A store of format version 1 (no runtime in its checkpoints) still
// opens, and is taken as the runtime's: nothing tells it is not.
func TestFormatVersion1StillOpens(t *testing.T) {
	e := newEnv(t)
	j := e.open() // Runtime zero: checkpoints end with three empty strings
	commit(t, j, 0, 4)
	e.closeAs(j, asVersion1)
	e.opts.Runtime = Runtime{Endpoint: "unix:///run/a.sock", Name: "runtime-a"}
	j = e.open()
	if o := e.outcome(j); o != OutcomeClean {
		t.Fatalf("a version-1 store: outcome %s, want clean\n%s", o, e.logs.String())
	}
	if r, _ := j.Restore(); len(r.Pods) != 3 {
		t.Errorf("a version-1 store: restored %d pods, want 3", len(r.Pods))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// What it goes on writing names the runtime.
	e.opts.Runtime = Runtime{Endpoint: "unix:///run/a.sock", Name: "runtime-b"}
	if j = e.open(); e.outcome(j) != OutcomeOtherRuntime {
		t.Errorf("the store, rewritten over runtime-a, over runtime-b: %s", e.outcome(j))
	}
}

// asVersion1 rewrites a segment as format version 1 wrote it: as version
// 2 did (asVersion2), then header version 1, and checkpoints without the
// runtime (here three empty strings, one byte each), their frames and
// checksums redone.
func asVersion1(t *testing.T, data []byte) []byte {
	t.Helper()
	data = asVersion2(t, data)
	h := append([]byte(nil), data[:headerSize]...)
	binary.LittleEndian.PutUint16(h[8:], 1)
	copy(h[12:], crcBytes(h[:12]))
	out := h
	for off := headerSize; off < len(data); {
		payload, n, err := nextRecord(data[off:])
		if err != nil {
			t.Fatalf("at %d: %v", off, err)
		}
		if payload[0] == recCheckpoint {
			if !strings.HasSuffix(string(payload), "\x00\x00\x00") {
				t.Fatal("a checkpoint with a runtime: want one written with none")
			}
			payload = payload[:len(payload)-3]
		}
		out = frame(out, payload[0], func(b []byte) []byte { return append(b, payload[1:]...) })
		off += n
	}
	return out
}
