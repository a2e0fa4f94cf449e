// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/plegkit/pleg"
)

func ptr[T any](v T) *T { return &v }

// detailed returns event i with what a container's status tells, varied:
// an exit code of 0 must read back as 0, not as none.
func detailed(i int) pleg.Event {
	ev := event(i)
	switch i % 4 {
	case 0: // a start: image and attempt
		ev.Image, ev.Attempt = "nginx:1.27", ptr(uint32(i))
	case 1: // a death with its exit
		ev.Type, ev.Image, ev.Attempt = pleg.ContainerDied, "docker.io/library/busybox:1.36", ptr(uint32(0))
		ev.ExitCode, ev.Reason, ev.Message = ptr(int32(3)), "Error", "exit status 3"
		ev.FinishedAt = ev.Observed
	case 2: // exited 0
		ev.Type, ev.Image, ev.Attempt, ev.ExitCode, ev.Reason = pleg.ContainerDied, "job:1", ptr(uint32(2)), ptr(int32(0)),
			"Completed"
	case 3: // a sandbox: nothing
		ev.Type, ev.Sandbox, ev.ContainerName = pleg.ContainerDied, true, ""
	}
	return ev
}

func describeDetails(ev pleg.Event) string {
	s := fmt.Sprintf("%s %s image=%q", ev.Type, ev.ContainerID, ev.Image)
	if ev.Attempt != nil {
		s += fmt.Sprintf(" attempt=%d", *ev.Attempt)
	}
	if ev.ExitCode != nil {
		s += fmt.Sprintf(" exit=%d", *ev.ExitCode)
	}
	return s + fmt.Sprintf(" reason=%q message=%q finished=%d", ev.Reason, ev.Message, ev.FinishedAt.UnixNano())
}

// The image, attempt and exit of events survive a restart as committed,
// absent ones absent.
func TestEventDetailsKept(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	var want []string
	for i := range 8 {
		ev := detailed(i)
		if err := j.Commit([]pleg.Event{ev}, []pleg.PodReport{report(ev.PodUID, ev.ContainerID)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, describeDetails(ev))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = e.open()
	defer func() { _ = j.Close() }()
	got := readAll(j, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d: %s", len(got), len(want), describe(got))
	}
	for i, en := range got {
		if d := describeDetails(en.Event); d != want[i] {
			t.Errorf("entry %d:\n got  %s\n want %s", i, d, want[i])
		}
	}
}

// A store of format version 2 (events without image, attempt or exit)
// still opens, its events read without them, and what is written after
// has them.
func TestFormatVersion2StillOpens(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	for i := range 4 {
		ev := detailed(i)
		if err := j.Commit([]pleg.Event{ev}, []pleg.PodReport{report(ev.PodUID, ev.ContainerID)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range e.segments() {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, asVersion2(t, data))
	}
	j = e.open()
	defer func() { _ = j.Close() }()
	if o := e.outcome(j); o != OutcomeClean {
		t.Fatalf("a version-2 store: outcome %s, want clean\n%s", o, e.logs.String())
	}
	got := readAll(j, 0)
	if len(got) != 4 {
		t.Fatalf("a version-2 store: read %s, want 4 events", describe(got))
	}
	for i, en := range got {
		bare := detailed(i)
		bare.Image, bare.Attempt, bare.ExitCode, bare.Reason, bare.Message = "", nil, nil, "", ""
		if d, want := describeDetails(en.Event), describeDetails(bare); d != want {
			t.Errorf("entry %d:\n got  %s\n want %s", i, d, want)
		}
	}
	ev := detailed(5)
	if err := j.Commit([]pleg.Event{ev}, []pleg.PodReport{report(ev.PodUID, ev.ContainerID)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = e.open()
	got = readAll(j, 0)
	if len(got) != 5 || describeDetails(got[4].Event) != describeDetails(ev) {
		t.Errorf("after reopening, the event written after the version-2 ones: %s", describe(got))
	}
}

// asVersion2 rewrites a segment as format version 2 wrote it: header
// version 2, and batches whose events end after their times, their
// frames and checksums redone.
func asVersion2(t *testing.T, data []byte) []byte {
	t.Helper()
	h := append([]byte(nil), data[:headerSize]...)
	binary.LittleEndian.PutUint16(h[8:], 2)
	copy(h[12:], crcBytes(h[:12]))
	out := h
	for off := headerSize; off < len(data); {
		payload, n, err := nextRecord(data[off:])
		if err != nil {
			t.Fatalf("at %d: %v", off, err)
		}
		off += n
		if payload[0] != recBatch {
			out = frame(out, payload[0], func(b []byte) []byte { return append(b, payload[1:]...) })
			continue
		}
		r, err := decodeRecord(payload, formatVersion, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = frame(out, recBatch, func(b []byte) []byte {
			b = binary.AppendUvarint(b, r.batch.first)
			b = binary.AppendUvarint(b, uint64(len(r.batch.events)))
			for _, ev := range r.batch.events {
				ev.Image, ev.Attempt, ev.ExitCode, ev.Reason, ev.Message = "", nil, nil, "", ""
				// Version 3 adds four bytes to such an event: an empty
				// image, no presence bits, an empty reason and message.
				v3 := appendEvent(nil, &ev)
				b = append(b, v3[:len(v3)-4]...)
			}
			return appendPods(b, r.batch.pods)
		})
	}
	return out
}
