// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestHintTransitions(t *testing.T) {
	for _, tc := range []struct {
		stages stage
		want   []EventType
	}{
		{stageCreated | stageStarted | stageStopped | stageDeleted, []EventType{ContainerStarted, ContainerDied, ContainerRemoved}},
		{stageStarted | stageStopped | stageDeleted, []EventType{ContainerStarted, ContainerDied, ContainerRemoved}},
		{stageStarted | stageDeleted, []EventType{ContainerStarted, ContainerDied, ContainerRemoved}},
		{stageStopped | stageDeleted, []EventType{ContainerDied, ContainerRemoved}},
		{stageCreated | stageDeleted, []EventType{ContainerDied, ContainerRemoved}},
	} {
		h := &hint{id: "x", stages: tc.stages}
		if got := eventTypes(h.transitions()); !slices.Equal(got, tc.want) {
			t.Errorf("stages %04b: %v, want %v", tc.stages, got, tc.want)
		}
	}
}

// eventTypes are the events transitions deliver.
func eventTypes(ts []transition) []EventType {
	var out []EventType
	for _, tr := range ts {
		types, n := transitionEvents(tr.old, tr.new)
		for _, typ := range types[:n] {
			if typ != ContainerChanged {
				out = append(out, typ)
			}
		}
	}
	return out
}

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new state
		seen     stage
		want     []EventType
	}{
		{"nothing seen", stateNonExistent, stateExited, 0, []EventType{ContainerDied}},
		{"started and exited between relists", stateNonExistent, stateExited, stageStarted | stageStopped, []EventType{ContainerStarted, ContainerDied}},
		{"created one relist, started and exited before the next", stateUnknown, stateExited, stageStarted, []EventType{ContainerStarted, ContainerDied}},
		{"ran and was removed: the exit comes from the stream", stateRunning, stateNonExistent, stageStopped | stageDeleted, []EventType{ContainerDied, ContainerRemoved}},
		{"a start seen after the exit adds nothing", stateRunning, stateExited, stageStarted, []EventType{ContainerDied}},
		{"backwards is left alone", stateExited, stateRunning, stageStarted | stageStopped, []EventType{ContainerStarted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := eventTypes(expand(transition{id: "c", old: tc.old, new: tc.new}, tc.seen))
			if !slices.Equal(got, tc.want) {
				t.Errorf("%v -> %v seen %04b: %v, want %v", tc.old, tc.new, tc.seen, got, tc.want)
			}
		})
	}
}

func podEvent(uid, sandboxID, id string, typ runtimeapi.ContainerEventType, containers ...string) *runtimeapi.ContainerEventResponse {
	ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ}
	if uid != "" {
		ev.PodSandboxStatus = &runtimeapi.PodSandboxStatus{Id: sandboxID, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid, Name: "pod-" + uid, Namespace: "ns"}}
	}
	for _, c := range containers {
		ev.ContainersStatuses = append(ev.ContainersStatuses, &runtimeapi.ContainerStatus{Id: c, Metadata: &runtimeapi.ContainerMetadata{Name: "name-" + c}})
	}
	return ev
}

// noteIn notes ev in b, finding its pod as the generator does when no
// record knows it: from its sandbox status, or from an earlier event.
func noteIn(b *hintBook, ev *runtimeapi.ContainerEventResponse, replay bool, now time.Time) (string, bool) {
	uid := ev.GetPodSandboxStatus().GetMetadata().GetUid()
	if uid == "" {
		uid = b.ownerOf(ev.GetContainerId())
	}
	from := sentLive
	if replay {
		from = replayed
	}
	return uid, b.note(ev, uid, nil, from, now)
}

func TestHintBook(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	knowsNothing := func(string, bool) (bool, bool) { return false, false }

	t.Run("a container's events fold into one hint", func(t *testing.T) {
		b := newHintBook()
		for _, typ := range []runtimeapi.ContainerEventType{evCreated, evStarted, evStopped, evDeleted} {
			if uid, ok := noteIn(b, podEvent("p", "sb", "c", typ, "c"), false, t0); !ok || uid != "p" {
				t.Fatalf("note = %q, %v", uid, ok)
			}
		}
		if n, _, _ := b.size(); n != 1 {
			t.Fatalf("%d hints, want 1", n)
		}
		h := b.take("p", knowsNothing, t0)
		if got := eventTypes(h.extra); !slices.Equal(got, []EventType{ContainerStarted, ContainerDied, ContainerRemoved}) {
			t.Errorf("short-lived container: %v", got)
		}
		if h.extra[0].name != "name-c" {
			t.Errorf("name %q, want the one in the payload", h.extra[0].name)
		}
		// Reported removed: a late event or relist does not tell it again.
		noteIn(b, podEvent("p", "sb", "c", evDeleted), false, t0)
		if h := b.take("p", knowsNothing, t0); len(h.extra) != 0 {
			t.Errorf("reported again: %v", h.extra)
		}
	})

	t.Run("an event without a sandbox status finds its pod by ID", func(t *testing.T) {
		b := newHintBook()
		noteIn(b, podEvent("p", "sb", "sb", evCreated, "c"), false, t0)
		if uid, ok := noteIn(b, podEvent("", "", "c", evStopped), false, t0); !ok || uid != "p" {
			t.Errorf("container of a known sandbox: %q, %v", uid, ok)
		}
		if _, ok := noteIn(b, podEvent("", "", "stranger", evStopped), false, t0); ok {
			t.Error("an ID no event named was given a pod")
		}
	})

	t.Run("a replayed event only tells the pod", func(t *testing.T) {
		b := newHintBook()
		if uid, ok := noteIn(b, podEvent("p", "sb", "c", evDeleted, "c"), true, t0); !ok || uid != "p" {
			t.Fatalf("note = %q, %v", uid, ok)
		}
		if n, _, _ := b.size(); n != 0 {
			t.Errorf("%d hints from a replay", n)
		}
	})

	t.Run("known containers report the stages seen", func(t *testing.T) {
		b := newHintBook()
		noteIn(b, podEvent("p", "sb", "c", evStarted, "c"), false, t0)
		noteIn(b, podEvent("p", "sb", "c", evStopped, "c"), false, t0)
		h := b.take("p", func(id string, _ bool) (bool, bool) { return id == "c", id == "c" }, t0)
		if len(h.extra) != 0 || h.seen[hintKey{"c", false}] != stageStarted|stageStopped {
			t.Errorf("take = %+v", h)
		}
		if n, _, _ := b.size(); n != 0 {
			t.Errorf("%d hints left", n)
		}
	})

	t.Run("a DELETED that came after the list waits for the relist that finds the container gone", func(t *testing.T) {
		b := newHintBook()
		noteIn(b, podEvent("p", "sb", "c", evStopped, "c"), false, t0)
		noteIn(b, podEvent("p", "sb", "c", evDeleted), false, t0)
		listed := func(id string, _ bool) (bool, bool) { return id == "c", id == "c" }
		if h := b.take("p", listed, t0); h.seen[hintKey{"c", false}] != stageStopped|stageDeleted {
			t.Errorf("take while listed = %+v", h)
		}
		if n, _, _ := b.size(); n != 1 {
			t.Fatalf("%d hints, want c's, kept", n)
		}
		gone := func(id string, _ bool) (bool, bool) { return id == "c", false }
		if h := b.take("p", gone, t0.Add(time.Second)); h.seen[hintKey{"c", false}]&stageDeleted == 0 || len(h.extra) != 0 {
			t.Errorf("take once gone = %+v, want its deletion seen", h)
		}
		if n, _, _ := b.size(); n != 0 {
			t.Errorf("%d hints left", n)
		}
	})

	t.Run("unsettled hints wait, then expire", func(t *testing.T) {
		b := newHintBook()
		noteIn(b, podEvent("p", "sb", "c", evStarted, "c"), false, t0)
		if h := b.take("p", knowsNothing, t0.Add(time.Second)); len(h.extra) != 0 {
			t.Errorf("take = %+v", h)
		}
		if n, _, _ := b.size(); n != 1 {
			t.Fatalf("%d hints, want the one still waiting", n)
		}
		b.prune(t0.Add(hintTTL+time.Second), func(string, string) bool { return false })
		if n, owners, _ := b.size(); n != 0 || owners != 0 {
			t.Errorf("after the TTL: %d hints, %d owners", n, owners)
		}
	})

	t.Run("owners are kept while a record knows them", func(t *testing.T) {
		b := newHintBook()
		noteIn(b, podEvent("p", "sb", "c", evStarted, "c", "d"), false, t0)
		b.take("p", func(string, bool) (bool, bool) { return true, true }, t0)
		later := t0.Add(hintTTL + time.Second)
		b.prune(later, func(uid, id string) bool { return uid == "p" && id != "d" })
		if _, owners, _ := b.size(); owners != 2 {
			t.Errorf("%d owners, want c and sb (d is known to no record)", owners)
		}
		if uid, ok := noteIn(b, podEvent("", "", "sb", evDeleted), false, later); !ok || uid != "p" {
			t.Errorf("sandbox DELETED without status: %q, %v", uid, ok)
		}
	})

	t.Run("tombstones expire", func(t *testing.T) {
		b := newHintBook()
		b.tombstone([]transition{{id: "c", old: stateExited, new: stateNonExistent}}, t0)
		if !b.isRemoved("c") {
			t.Fatal("no tombstone")
		}
		b.prune(t0.Add(tombstoneTTL+time.Second), func(string, string) bool { return false })
		if b.isRemoved("c") {
			t.Error("tombstone kept past its TTL")
		}
	})
}

// FuzzHintBook notes arbitrary event sequences and checks what must hold
// whatever the runtime sends: no panic, hints only for pods that events
// named, at most one hint per container, transitions that a container can
// live in that order, and nothing left once everything expired.
func FuzzHintBook(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{3, 3, 3, 0x83, 0x43, 0x13})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0xff, 0x00})
	f.Fuzz(func(t *testing.T, script []byte) {
		b := newHintBook()
		now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
		pods := []string{"", "p", "q"}
		ids := []string{"", "sb", "c1", "c2"}
		for i, x := range script {
			uid := pods[int(x>>6)%len(pods)]
			id := ids[int(x>>4)%len(ids)]
			typ := runtimeapi.ContainerEventType(int32(x>>2) % 5) // 4 is not a CRI type
			var containers []string
			if x&1 != 0 {
				containers = append(containers, "c1")
			}
			if x&2 != 0 {
				containers = append(containers, "c2")
			}
			got, ok := noteIn(b, podEvent(uid, "sb", id, typ, containers...), i%7 == 3, now)
			if ok && (got == "" || id == "") {
				t.Fatalf("note gave pod %q for ID %q", got, id)
			}
			now = now.Add(time.Second)
		}
		for _, ph := range b.pods {
			seen := map[string]bool{}
			for _, h := range ph.items {
				if seen[h.id] {
					t.Fatalf("two hints for %q", h.id)
				}
				seen[h.id] = true
			}
		}
		for _, uid := range []string{"p", "q"} {
			h := b.take(uid, func(id string, _ bool) (bool, bool) { return id == "c2", id == "c2" }, now)
			last := map[string]int{}
			for _, tr := range h.extra {
				if tr.new.rankTo() <= tr.old.rankFrom() || tr.old.rankFrom() < last[tr.id] {
					t.Fatalf("transition %v -> %v of %s goes back", tr.old, tr.new, tr.id)
				}
				last[tr.id] = tr.new.rankTo()
			}
		}
		b.prune(now.Add(tombstoneTTL+hintTTL), func(string, string) bool { return false })
		if h, o, r := b.size(); h+o+r != 0 {
			t.Fatalf("after every TTL: %d hints, %d owners, %d tombstones", h, o, r)
		}
	})
}
