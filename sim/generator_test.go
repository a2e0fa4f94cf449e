// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

// expectedEvents derives from a history the pod lifecycle events a
// relisting generator must deliver when it relists after every tick: per
// container or sandbox ID, one event per state change it can see.
func expectedEvents(hist []Change) map[string][]pleg.EventType {
	want := make(map[string][]pleg.EventType)
	for _, ch := range hist {
		id := ch.ContainerID
		if id == "" {
			id = ch.SandboxID
		}
		switch ch.Op {
		case ChangeRunPod, ChangeStartContainer:
			want[id] = append(want[id], pleg.ContainerStarted)
		case ChangeStopPod, ChangeExitContainer:
			want[id] = append(want[id], pleg.ContainerDied)
		case ChangeRemovePod, ChangeRemoveContainer:
			want[id] = append(want[id], pleg.ContainerRemoved)
		}
	}
	return want
}

// The generator, over our CRI adapter, over the simulator with churn,
// produces the events the churn implies: every crash a ContainerDied and
// the new attempt a ContainerStarted, every replaced pod Died and Removed
// for its sandbox and containers and Started for the new one, every
// short-lived container Started, Died and Removed.
func TestGeneratorOverSimulator(t *testing.T) {
	// A fake clock: the churn ticks only when the test steps it.
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := startSim(t, Options{Pods: 20, Containers: 2, Churn: busyChurn(), Seed: 42, Clock: clk})
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	g, err := pleg.New(rt, pleg.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	sub := g.Subscribe()
	defer sub.Close()
	ctx := testContext(t)

	got := make(map[string][]pleg.EventType)
	var sandboxEvents, died int
	relist := func() {
		t.Helper()
		if err := g.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		for {
			ev, ok := sub.TryNext()
			if !ok {
				return
			}
			got[ev.ContainerID] = append(got[ev.ContainerID], ev.Type)
			if ev.Sandbox {
				sandboxEvents++
			}
			if ev.Type == pleg.ContainerDied {
				died++
			}
		}
	}
	relist()
	for range 150 {
		s.Step()
		relist()
	}

	hist := s.History()
	want := expectedEvents(hist)
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if !slices.Equal(got[id], want[id]) {
			t.Errorf("%.12s: events %v, want %v (%s)", id, got[id], want[id], describe(hist, id))
		}
	}
	for id, evs := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%.12s: unexpected events %v", id, evs)
		}
	}
	causes := make(map[Cause]int)
	for _, ch := range hist {
		causes[ch.Cause]++
	}
	if causes[CauseCrash] == 0 || causes[CauseRestart] == 0 || causes[CauseReplace] == 0 || causes[CauseShortLived] == 0 || sandboxEvents == 0 || died == 0 {
		t.Errorf("too little churn to judge: %v, %d sandbox events, %d died", causes, sandboxEvents, died)
	}
}

func describe(hist []Change, id string) string {
	var s string
	for _, ch := range hist {
		if ch.ContainerID == id || ch.ContainerID == "" && ch.SandboxID == id {
			s += fmt.Sprintf("[tick %d %s %s]", ch.Tick, ch.Op, ch.Cause)
		}
	}
	return s
}

// TestSandboxContainerStatuses: with the option, sandbox status answers
// carry their containers' statuses and a timestamp, and a relist of every
// pod makes one status call per pod instead of one per container too.
func TestSandboxContainerStatuses(t *testing.T) {
	for _, carry := range []bool{false, true} {
		t.Run(fmt.Sprint("carry=", carry), func(t *testing.T) {
			s := startSim(t, Options{Pods: 10, Containers: 3, Seed: 3, SandboxContainerStatuses: carry})
			rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			cache := podcache.New()
			g, err := pleg.New(rt, pleg.Options{Logger: quietLogger(), Mode: pleg.ModeGeneric, Cache: cache})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Relist(testContext(t)); err != nil {
				t.Fatal(err)
			}
			calls := s.Stats().Calls
			wantStatus := uint64(30)
			if carry {
				wantStatus = 0
			}
			if calls[runtime.OpPodSandboxStatus] != 10 || calls[runtime.OpContainerStatus] != wantStatus {
				t.Errorf("%d sandbox and %d container status calls, want 10 and %d", calls[runtime.OpPodSandboxStatus], calls[runtime.OpContainerStatus], wantStatus)
			}
			for uid, e := range cache.GetAll() {
				if len(e.Status.Containers) != 3 || e.Status.Containers[0].GetMetadata() == nil {
					t.Errorf("pod %s: %d containers cached", uid, len(e.Status.Containers))
				}
			}
		})
	}
}
