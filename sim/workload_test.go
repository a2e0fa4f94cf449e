// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"slices"
	"strconv"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// busyChurn makes every kind of change within a few hundred ticks.
func busyChurn() Churn {
	return Churn{Crashes: 20, CleanExits: 5, PodReplacements: 3, ShortLived: 10}
}

func newSim(t testing.TB, opts Options) *Sim {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func steps(s *Sim, n int) {
	for range n {
		s.Step()
	}
}

// Two runs with one seed produce the same runtime history; another seed
// another one.
func TestDeterminism(t *testing.T) {
	run := func(seed uint64) []Change {
		s := newSim(t, Options{Pods: 30, Containers: 2, Churn: busyChurn(), Seed: seed, GC: true})
		steps(s, 300)
		return s.History()
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("histories of one seed differ at change %d:\n%v\n%v", i, a[i], b[i])
			}
		}
		t.Fatalf("histories of one seed differ in length: %d and %d", len(a), len(b))
	}
	if slices.Equal(a, c) {
		t.Fatal("two seeds gave one history")
	}
	// Every kind of churn happened.
	causes := make(map[Cause]int)
	for _, ch := range a {
		causes[ch.Cause]++
	}
	for _, cause := range []Cause{CauseInitial, CauseCrash, CauseRestart, CauseExit, CauseReplace, CauseShortLived, CauseGC} {
		if causes[cause] == 0 {
			t.Errorf("no change caused by %s in %v", cause, causes)
		}
	}
}

// The churn does what it says: crashes exit non-zero and come back as the
// next attempt; clean exits exit 0 and stay down; replaced pods go and new
// ones come; short-lived containers are gone within a few ticks.
func TestChurnSemantics(t *testing.T) {
	s := newSim(t, Options{Pods: 30, Containers: 2, Churn: busyChurn(), Seed: 3})
	steps(s, 300)
	hist := s.History()

	type life struct {
		created, exited, removed uint64
		exit                     Change
		hasExit, hasRemove       bool
	}
	lives := make(map[string]*life)
	restarts := make(map[string]Change) // by pod/name/attempt
	for _, ch := range hist {
		if ch.ContainerID == "" {
			continue
		}
		l := lives[ch.ContainerID]
		if l == nil {
			l = &life{}
			lives[ch.ContainerID] = l
		}
		switch ch.Op {
		case ChangeCreateContainer:
			l.created = ch.Tick
			if ch.Cause == CauseRestart {
				restarts[ch.PodUID+"/"+ch.ContainerName+"/"+strconv.Itoa(int(ch.Attempt))] = ch
			}
		case ChangeExitContainer:
			l.exited, l.exit, l.hasExit = ch.Tick, ch, true
		case ChangeRemoveContainer:
			l.removed, l.hasRemove = ch.Tick, true
		}
	}
	crashes, exits, shorts := 0, 0, 0
	for _, ch := range hist {
		if ch.Op != ChangeExitContainer {
			continue
		}
		switch ch.Cause {
		case CauseCrash:
			crashes++
			if ch.ExitCode == 0 || ch.Reason != "Error" {
				t.Errorf("crash with code %d reason %q", ch.ExitCode, ch.Reason)
			}
			next := ch.PodUID + "/" + ch.ContainerName + "/" + strconv.Itoa(int(ch.Attempt+1))
			if r, ok := restarts[next]; ok && (r.Tick <= ch.Tick || r.Tick > ch.Tick+3) {
				t.Errorf("crash at tick %d restarted at tick %d", ch.Tick, r.Tick)
			}
		case CauseExit:
			exits++
			if ch.ExitCode != 0 || ch.Reason != "Completed" {
				t.Errorf("clean exit with code %d reason %q", ch.ExitCode, ch.Reason)
			}
			if _, ok := restarts[ch.PodUID+"/"+ch.ContainerName+"/"+strconv.Itoa(int(ch.Attempt+1))]; ok {
				t.Errorf("clean exit restarted: %v", ch)
			}
		case CauseShortLived:
			shorts++
			l := lives[ch.ContainerID]
			if l.hasRemove && l.removed-l.created > 4 {
				t.Errorf("short-lived container lived %d ticks", l.removed-l.created)
			}
		}
	}
	if crashes == 0 || exits == 0 || shorts == 0 || len(restarts) == 0 {
		t.Fatalf("crashes %d, exits %d, short-lived %d, restarts %d", crashes, exits, shorts, len(restarts))
	}
	// The pod count holds: replaced pods are replaced.
	if st := s.Stats(); st.Pods+st.PodsNotReady != 30 {
		t.Errorf("%d ready and %d stopped pods, want 30 in all", st.Pods, st.PodsNotReady)
	}

	// Restarted containers carry the kubelet's restart count.
	for _, c := range s.st.containers {
		if got := c.annotations["io.kubernetes.container.restartCount"]; got != strconv.Itoa(int(c.md.GetAttempt())) {
			t.Errorf("container attempt %d has restart count %q", c.md.GetAttempt(), got)
		}
	}
}

// exitedPerName counts the exited containers of each pod and container
// name.
func exitedPerName(s *Sim) map[string]int {
	n := make(map[string]int)
	for _, c := range s.st.containers {
		if c.state == runtimeapi.ContainerState_CONTAINER_EXITED && !c.short {
			n[c.sb.id+"/"+c.md.GetName()]++
		}
	}
	return n
}

// Without GC exited containers accumulate; with it, each pod keeps the
// newest exited container of a name.
func TestGarbageCollection(t *testing.T) {
	churn := Churn{Crashes: 50}
	off := newSim(t, Options{Pods: 5, Containers: 2, Churn: churn, Seed: 1})
	on := newSim(t, Options{Pods: 5, Containers: 2, Churn: churn, Seed: 1, GC: true})
	steps(off, 200)
	steps(on, 200)
	maxOff, maxOn := 0, 0
	for _, n := range exitedPerName(off) {
		maxOff = max(maxOff, n)
	}
	for _, n := range exitedPerName(on) {
		maxOn = max(maxOn, n)
	}
	if maxOff < 5 {
		t.Errorf("without GC at most %d exited containers of a name accumulated", maxOff)
	}
	if maxOn != 1 {
		t.Errorf("with GC up to %d exited containers of a name are kept, want 1", maxOn)
	}
	if off.Stats().ContainersExited <= on.Stats().ContainersExited {
		t.Errorf("exited containers: %d without GC, %d with", off.Stats().ContainersExited, on.Stats().ContainersExited)
	}
}

// Start ticks the churn on the clock.
func TestChurnTicker(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := startSim(t, Options{Pods: 2, Containers: 1, Churn: Churn{Crashes: 1, Tick: time.Second}, Clock: clk})
	for i := range 3 {
		eventually(t, "the churn ticker", func() bool { return clk.HasWaiters() })
		clk.Step(time.Second)
		eventually(t, "a tick", func() bool { return s.Stats().Ticks == uint64(i+1) })
	}
}

// Exited containers at start are earlier attempts of each pod's
// containers, spread over their names, with the running attempt last.
func TestInitialExitedContainers(t *testing.T) {
	s := startSim(t, Options{Pods: 2, Containers: 2, Exited: 3})
	client := dial(t, s)
	resp, err := client.ListContainers(testContext(t), &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ pod, name string }
	attempts := make(map[key][]uint32)
	exited, running := 0, 0
	for _, c := range resp.GetContainers() {
		k := key{c.GetPodSandboxId(), c.GetMetadata().GetName()}
		attempts[k] = append(attempts[k], c.GetMetadata().GetAttempt())
		switch c.GetState() {
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			exited++
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			running++
			// The running attempt follows every exited one.
			if got, want := c.GetMetadata().GetAttempt(), c.GetAnnotations()["io.kubernetes.container.restartCount"]; strconv.Itoa(int(got)) != want {
				t.Errorf("attempt %d with restart count %s", got, want)
			}
		}
	}
	if exited != 6 || running != 4 {
		t.Fatalf("%d exited and %d running containers, want 6 and 4", exited, running)
	}
	for k, a := range attempts {
		slices.Sort(a)
		// c0 gets two exited attempts, c1 one: 3 over 2 names.
		want := map[string][]uint32{"c0": {0, 1, 2}, "c1": {0, 1}}[k.name]
		if !slices.Equal(a, want) {
			t.Errorf("%s in %s: attempts %v, want %v", k.name, k.pod, a, want)
		}
	}
	if _, err := New(Options{Exited: 1}); err == nil {
		t.Error("exited containers without containers per pod were accepted")
	}
}
