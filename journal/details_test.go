// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

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
	e.closeAs(j, asVersion2)
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

// closeAs closes j and rewrites every segment of the store with as: as an
// older version of pleg wrote it.
func (e *env) closeAs(j *Journal, as func(*testing.T, []byte) []byte) {
	e.t.Helper()
	if err := j.Close(); err != nil {
		e.t.Fatal(err)
	}
	for _, path := range e.segments() {
		data, err := os.ReadFile(path)
		if err != nil {
			e.t.Fatal(err)
		}
		writeFile(e.t, path, as(e.t, data))
	}
}

// asVersion2 rewrites a segment as format version 2 wrote it (asVersion).
func asVersion2(t *testing.T, data []byte) []byte { return asVersion(t, data, 2) }

// asVersion rewrites a segment as format version 2 or 3 wrote it: header
// version, and batches whose events name their type and pod as strings,
// each in full, and end after their times in version 2, their frames and
// checksums redone.
func asVersion(t *testing.T, data []byte, version uint16) []byte {
	t.Helper()
	h := append([]byte(nil), data[:headerSize]...)
	binary.LittleEndian.PutUint16(h[8:], version)
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
				b = appendString(b, string(ev.Type))
				for _, s := range []string{ev.PodUID, ev.PodName, ev.PodNamespace, ev.ContainerID, ev.ContainerName} {
					b = appendString(b, s)
				}
				var flags byte
				if ev.Sandbox {
					flags |= flagSandbox
				}
				if ev.AfterRestart {
					flags |= flagAfterRestart
				}
				b = append(b, flags)
				for _, at := range []time.Time{ev.Observed, ev.StartedAt, ev.FinishedAt} {
					b = appendTime(b, at)
				}
				if version >= 3 {
					b = appendDetails(b, &ev)
				}
			}
			return appendPods(b, r.batch.pods)
		})
	}
	return out
}

// relistBatch is what a relist commits: events pod by pod, sharing its
// start, with an event's details, a sandbox, a pod name met again later
// in another namespace, and an event observed at another time.
func relistBatch() []pleg.Event {
	var events []pleg.Event
	for i := range 12 {
		ev := detailed(i)
		ev.PodUID, ev.PodName = fmt.Sprintf("pod-%d", i/4), fmt.Sprintf("web-%d", i/4)
		ev.Observed = testNow
		events = append(events, ev)
	}
	events[5].Observed = testNow.Add(time.Millisecond)
	events[6].AfterRestart, events[6].StartedAt = true, testNow.Add(-time.Hour)
	events[9].PodNamespace = "other"
	events[10].PodNamespace = "other"
	return events
}

// normalized is ev with its times as decoding returns them, for
// comparing events whole.
func normalized(ev pleg.Event) pleg.Event {
	for _, at := range []*time.Time{&ev.Observed, &ev.StartedAt, &ev.FinishedAt} {
		if !at.IsZero() {
			*at = time.Unix(0, at.UnixNano())
		}
	}
	return ev
}

func equalEvents(t *testing.T, got, want []pleg.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if g, w := normalized(got[i]), normalized(want[i]); !reflect.DeepEqual(g, w) {
			t.Errorf("event %d:\n got  %+v\n want %+v", i, g, w)
		}
	}
}

// A batch reads back as committed, every field of every event, though
// version 4 writes a pod and an observed time once for a run of events.
func TestBatchRoundTrip(t *testing.T) {
	events := relistBatch()
	pods := []pleg.PodReport{report("pod-0", "c-0"), report("pod-1", "c-4")}
	payload, _, err := nextRecord(appendBatch(nil, 7, events, pods))
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRecord(payload, formatVersion, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if r.batch.first != 7 || !reflect.DeepEqual(r.batch.pods, pods) {
		t.Errorf("batch from %d with pods %+v", r.batch.first, r.batch.pods)
	}
	equalEvents(t, r.batch.events, events)
	one, _, _ := nextRecord(appendBatch(nil, 7, events[:1], nil))
	if per := float64(len(payload)) / float64(len(events)); per >= float64(len(one)) {
		t.Errorf("%.0f bytes an event of a relist's batch, %d alone: want the pod and time written once", per, len(one))
	}
}

// The first event of a batch has no event before it to share a pod or a
// time with: a batch that says it does is damage.
func TestBatchFirstEventRefersBack(t *testing.T) {
	for _, flag := range []byte{flagSamePod, flagSameObserved} {
		ev := event(0)
		payload, _, _ := nextRecord(appendBatch(nil, 1, []pleg.Event{ev}, nil))
		b := append([]byte(nil), payload...)
		// recBatch, first (1), count (1), then the event's type and flags.
		b[4] |= flag
		if _, err := decodeRecord(b, formatVersion, nil); err == nil {
			t.Errorf("flags %#x on a batch's first event: no error", b[4])
		}
	}
}

// A store of format version 3 (events with their type and pod as
// strings, each in full) still opens and reads as committed; what is
// written after is version 4, and reads back too.
func TestFormatVersion3StillOpens(t *testing.T) {
	e := newEnv(t)
	j := e.open()
	events := relistBatch()
	if err := j.Commit(events[:6], []pleg.PodReport{report("pod-0", "c-0")}); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit(events[6:], []pleg.PodReport{report("pod-2", "c-9")}); err != nil {
		t.Fatal(err)
	}
	e.closeAs(j, func(t *testing.T, data []byte) []byte { return asVersion(t, data, 3) })
	j = e.open()
	if o := e.outcome(j); o != OutcomeClean {
		t.Fatalf("a version-3 store: outcome %s, want clean\n%s", o, e.logs.String())
	}
	var got []pleg.Event
	for _, en := range readAll(j, 0) {
		got = append(got, en.Event)
	}
	equalEvents(t, got, events)
	if err := j.Commit(events[:4], nil); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = e.open()
	defer func() { _ = j.Close() }()
	got = got[:0]
	for _, en := range readAll(j, 0) {
		got = append(got, en.Event)
	}
	equalEvents(t, got, append(events, events[:4]...))
}
