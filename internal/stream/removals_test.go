// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// TestRemovalWatchCompare: an item the generator reported exited, that a
// list begun after it misses, asks for a relist of its pod at each miss
// until removalMisses, then is forgotten; an item removed is forgotten at
// once, and a list that began before an item was learned says nothing of
// it.
func TestRemovalWatchCompare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var watched bool
	w := newRemovalWatch(nil, clock.RealClock{}, slog.New(slog.DiscardHandler),
		func(RemovalKind) bool { return watched }, func(string) {})

	w.settled("p1", []Item{{ID: "c1", Now: ItemExited}}, at(0))
	if c, _ := w.size(); c != 0 {
		t.Fatalf("%d containers known while the kind is not watched", c)
	}
	watched = true
	w.settled("p1", []Item{{ID: "c1", Now: ItemExited}, {ID: "c2", Now: ItemRunning}}, at(time.Second))
	w.settled("p2", []Item{{ID: "sb2", Sandbox: true, Now: ItemRunning}}, at(time.Second))
	if c, p := w.size(); c != 1 || p != 1 {
		t.Fatalf("knows %d containers and %d sandboxes, want 1 and 1 (a running container may not go unseen)", c, p)
	}
	if gone := w.compare(ContainerRemovals, nil, at(0)); len(gone) != 0 {
		t.Errorf("a list begun before c1 was learned found %v gone", gone)
	}
	for i := range removalMisses {
		if gone := w.compare(ContainerRemovals, nil, at(time.Duration(2+i)*time.Second)); !slices.Equal(gone, []string{"p1"}) {
			t.Errorf("miss %d: gone %v, want [p1]", i+1, gone)
		}
	}
	if gone := w.compare(ContainerRemovals, nil, at(time.Minute)); len(gone) != 0 {
		t.Errorf("after %d misses: gone %v, want c1 forgotten", removalMisses, gone)
	}
	if c, _ := w.size(); c != 0 {
		t.Errorf("%d containers still known", c)
	}
	w.settled("p2", []Item{{ID: "sb2", Sandbox: true, Now: ItemRemoved}}, at(time.Minute))
	if _, p := w.size(); p != 0 {
		t.Errorf("%d sandboxes known after the removal was reported", p)
	}
	// A list's items are known from then on.
	w.compare(PodRemovals, map[string]string{"sb3": "p3"}, at(2*time.Minute))
	if gone := w.compare(PodRemovals, nil, at(3*time.Minute)); !slices.Equal(gone, []string{"p3"}) {
		t.Errorf("gone %v, want [p3], listed before and missed now", gone)
	}
}
