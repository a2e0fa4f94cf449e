// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func newTestFanout(t *testing.T) *fanout {
	t.Helper()
	m, err := metrics.NewPLEG(nil)
	if err != nil {
		t.Fatal(err)
	}
	return newFanout(10, m, nil)
}

// change builds a pod change of container transitions "id:old>new".
func change(uid string, steps ...string) *podChange {
	c := &podChange{podRef: podRef{uid: uid, name: "n-" + uid, namespace: "ns"}, observed: testStart}
	states := map[string]state{"none": stateNonExistent, "run": stateRunning, "exit": stateExited, "unk": stateUnknown}
	for _, s := range steps {
		var id, from, to string
		if _, err := fmt.Sscanf(s, "%1s:%s", &id, &from); err != nil {
			panic(err)
		}
		from, to, _ = cut(from, ">")
		c.transitions = append(c.transitions, transition{id: id, name: "ctr-" + id, old: states[from], new: states[to]})
	}
	return c
}

func cut(s, sep string) (before, after string, found bool) {
	for i := range len(s) - len(sep) + 1 {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// readAll takes every pending event.
func readAll(s *Subscription) []ev {
	var out []ev
	for {
		e, ok := s.TryNext()
		if !ok {
			return out
		}
		out = append(out, ev{e.PodUID, e.Type, e.ContainerID})
	}
}

func TestSubscriptionCoalescing(t *testing.T) {
	type step struct {
		add  *podChange
		read bool
	}
	add := func(c *podChange) step { return step{add: c} }
	read := step{read: true}
	withSync := func(c *podChange) *podChange { c.podSync = true; return c }
	withCondition := func(c *podChange) *podChange { c.conditionMet = true; return c }
	S, D, R := ContainerStarted, ContainerDied, ContainerRemoved

	for _, tc := range []struct {
		name          string
		steps         []step
		want          []ev
		wantCoalesced float64
	}{
		{
			name:  "keeping up: every event in order",
			steps: []step{add(change("p", "a:none>run")), read, add(change("p", "a:run>exit")), read, add(change("p", "a:exit>none")), read},
			want:  []ev{{"p", S, "a"}, {"p", D, "a"}, {"p", R, "a"}},
		},
		{
			name:  "lagging: a life going on keeps every event",
			steps: []step{add(change("p", "a:none>run")), add(change("p", "a:run>exit")), read},
			want:  []ev{{"p", S, "a"}, {"p", D, "a"}},
		},
		{
			name:  "lagging: a container born and gone unseen is told whole",
			steps: []step{add(change("p", "a:none>run")), add(change("p", "a:run>exit")), add(change("p", "a:exit>none")), read},
			want:  []ev{{"p", S, "a"}, {"p", D, "a"}, {"p", R, "a"}},
		},
		{
			name:  "lagging: a container known running and gone is died and removed",
			steps: []step{add(change("p", "a:none>run")), read, add(change("p", "a:run>exit")), add(change("p", "a:exit>none")), read},
			want:  []ev{{"p", S, "a"}, {"p", D, "a"}, {"p", R, "a"}},
		},
		{
			name:          "lagging: through unknown and back is nothing",
			steps:         []step{add(change("p", "a:none>run")), read, add(change("p", "a:run>unk")), add(change("p", "a:unk>run")), read},
			want:          []ev{{"p", S, "a"}},
			wantCoalesced: 1,
		},
		{
			name:  "containers keep the order they first changed in",
			steps: []step{add(change("p", "a:none>run", "b:none>run")), add(change("p", "a:run>exit")), read},
			want:  []ev{{"p", S, "a"}, {"p", D, "a"}, {"p", S, "b"}},
		},
		{
			name:          "lagging: back through unknown and on folds",
			steps:         []step{add(change("p", "a:none>run")), add(change("p", "a:run>unk")), add(change("p", "a:unk>exit")), read},
			want:          []ev{{"p", D, "a"}},
			wantCoalesced: 1,
		},
		{
			name:          "pod events coalesce",
			steps:         []step{add(withSync(change("p"))), add(withSync(change("p"))), add(withCondition(change("p"))), add(withCondition(change("p"))), read},
			want:          []ev{{"p", PodSync, ""}, {"p", ConditionMet, ""}},
			wantCoalesced: 2,
		},
		{
			name:  "one change telling a whole life keeps it",
			steps: []step{add(change("p", "a:none>run", "a:run>exit", "a:exit>none")), read},
			want:  []ev{{"p", S, "a"}, {"p", D, "a"}, {"p", R, "a"}},
		},
		{
			name:  "a later change goes on with a pending life",
			steps: []step{add(change("p", "a:none>run", "a:run>exit")), add(change("p", "a:exit>none")), read},
			want:  []ev{{"p", S, "a"}, {"p", D, "a"}, {"p", R, "a"}},
		},
		{
			name:  "pods in the order their first event came",
			steps: []step{add(change("p", "a:none>run")), add(change("q", "b:none>run")), add(change("p", "c:none>run")), read},
			want:  []ev{{"p", S, "a"}, {"p", S, "c"}, {"q", S, "b"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFanout(t)
			sub := f.subscribe()
			var got []ev
			for _, s := range tc.steps {
				if s.read {
					got = append(got, readAll(sub)...)
					continue
				}
				f.publish(s.add, s.add.events())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("delivered:\n got  %v\n want %v", got, tc.want)
			}
			if n := testutil.ToFloat64(f.metrics.CoalescedEvents); n != tc.wantCoalesced {
				t.Errorf("coalesced %v, want %v", n, tc.wantCoalesced)
			}
			if sub.Pending() != 0 {
				t.Errorf("%d pods still pending", sub.Pending())
			}
		})
	}
}

// TestSubscriptionBoundsEndedLives: a pod whose containers come and go
// while the subscriber does not read keeps the lives of the latest
// maxEndedPending; older ones fold away, so that memory stays bounded.
func TestSubscriptionBoundsEndedLives(t *testing.T) {
	f := newTestFanout(t)
	sub := f.subscribe()
	const extra = 3
	for i := range maxEndedPending + extra {
		id := fmt.Sprintf("c%02d", i)
		for _, step := range []string{"none>run", "run>exit", "exit>none"} {
			c := change("p")
			st := change("p", "a:"+step).transitions[0]
			st.id = id
			c.transitions = []transition{st}
			f.publish(c, c.events())
		}
	}
	got := readAll(sub)
	if len(got) != 3*maxEndedPending {
		t.Fatalf("%d events, want the whole lives of the latest %d containers", len(got), maxEndedPending)
	}
	if got[0].data != fmt.Sprintf("c%02d", extra) {
		t.Errorf("first event about %s, want c%02d: the oldest lives fold away", got[0].data, extra)
	}
	if n := testutil.ToFloat64(f.metrics.CoalescedEvents); n != 3*extra {
		t.Errorf("coalesced %v, want %d", n, 3*extra)
	}
}

func TestSubscriptionPerPodOrderWhileDelivering(t *testing.T) {
	f := newTestFanout(t)
	sub := f.subscribe()
	publishChange(f, change("p", "a:none>run", "b:none>run"))
	first, _ := sub.TryNext() // p's batch is now being delivered
	// A later change of a container in the batch must not overtake it.
	publishChange(f, change("p", "a:run>exit"))
	rest := readAll(sub)
	got := append([]ev{{first.PodUID, first.Type, first.ContainerID}}, rest...)
	want := []ev{{"p", ContainerStarted, "a"}, {"p", ContainerStarted, "b"}, {"p", ContainerDied, "a"}}
	if !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
}

func TestSubscriptionNextAndClose(t *testing.T) {
	f := newTestFanout(t)
	sub := f.subscribe()
	other := f.subscribe()

	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next on an empty subscription = %v, want the context's error", err)
	}

	got := make(chan Event)
	go func() {
		e, err := sub.Next(t.Context())
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	publishChange(f, change("p", "a:none>run"))
	if e := <-got; e.Type != ContainerStarted || e.ContainerID != "a" || e.PodName != "n-p" {
		t.Errorf("Next = %+v", e)
	}
	// Every subscriber gets every event.
	if e, ok := other.TryNext(); !ok || e.ContainerID != "a" {
		t.Errorf("second subscriber got %+v, %v", e, ok)
	}

	sub.Close()
	sub.Close()
	publishChange(f, change("p", "a:run>exit"))
	if _, err := sub.Next(t.Context()); !errors.Is(err, ErrSubscriptionClosed) {
		t.Errorf("Next after Close = %v, want ErrSubscriptionClosed", err)
	}
	if e, ok := other.TryNext(); !ok || e.Type != ContainerDied {
		t.Errorf("open subscriber after another closed got %+v, %v", e, ok)
	}
}

// TestLosslessSubscription drives 100,000 runtime changes over 1,000 pods
// through the generator to a subscriber that reads one event for every ten
// produced. At the end, every pod's state as the subscriber learned it
// from its events equals the runtime's, and at no point was more than one
// pending entry per pod held.
func TestLosslessSubscription(t *testing.T) {
	const (
		pods             = 1000
		containersPerPod = 3
		changes          = 100_000
		changesPerRelist = 100
		slowdown         = 10
	)
	rng := rand.New(rand.NewPCG(1, 2))
	var podSpecs []fakeruntime.Pod
	current := make([][containersPerPod]string, pods) // container IDs in use
	attempt := make([][containersPerPod]int, pods)
	for i := range pods {
		p := fakeruntime.Pod{UID: fmt.Sprintf("pod-%04d", i), Name: fmt.Sprintf("pod-%04d", i), Namespace: "ns",
			Sandboxes: []fakeruntime.Sandbox{{ID: fmt.Sprintf("sb-%04d", i), State: ready}}}
		for j := range containersPerPod {
			id := fmt.Sprintf("c-%04d-%d-0", i, j)
			current[i][j] = id
			p.Containers = append(p.Containers, fakeruntime.Container{ID: id, Name: fmt.Sprintf("c%d", j), State: running})
		}
		podSpecs = append(podSpecs, p)
	}
	rt := fakeruntime.New(podSpecs...)
	isExited := map[string]bool{}
	e := newEnv(t, rt)
	slow := e.g.Subscribe()
	fast := e.g.Subscribe()
	defer slow.Close()
	defer fast.Close()

	// learned is each pod's containers as a subscriber's events tell them.
	type learned map[string]map[string]EventType
	apply := func(l learned, ev Event) {
		if l[ev.PodUID] == nil {
			l[ev.PodUID] = map[string]EventType{}
		}
		if ev.Type == ContainerRemoved {
			delete(l[ev.PodUID], ev.ContainerID)
			return
		}
		l[ev.PodUID][ev.ContainerID] = ev.Type
	}
	slowState, fastState := learned{}, learned{}
	owed := 0
	for n := 0; n < changes; {
		for range changesPerRelist {
			i, j := rng.IntN(pods), rng.IntN(containersPerPod)
			id := current[i][j]
			if !isExited[id] {
				// The container exits, cleanly or not.
				if err := rt.SetContainerState(id, exited, int32(rng.IntN(2))); err != nil {
					t.Fatal(err)
				}
				isExited[id] = true
			} else {
				// The exited container is replaced by a new attempt.
				attempt[i][j]++
				next := fmt.Sprintf("c-%04d-%d-%d", i, j, attempt[i][j])
				delete(isExited, id)
				if err := rt.ReplaceContainer(id, fakeruntime.Container{ID: next, Name: fmt.Sprintf("c%d", j), State: running, Attempt: uint32(attempt[i][j])}); err != nil {
					t.Fatal(err)
				}
				current[i][j] = next
			}
			n++
		}
		e.relist()
		produced := 0
		for {
			ev, ok := fast.TryNext()
			if !ok {
				break
			}
			apply(fastState, ev)
			produced++
		}
		owed += produced
		for ; owed >= slowdown; owed -= slowdown {
			if ev, ok := slow.TryNext(); ok {
				apply(slowState, ev)
			}
		}
		if p := slow.Pending(); p > pods {
			t.Fatalf("after %d changes %d pods pending, more than the %d pods", n, p, pods)
		}
	}
	if slow.Pending() == 0 {
		t.Fatal("the slow subscriber never fell behind; the test does not test coalescing")
	}
	for {
		ev, ok := slow.TryNext()
		if !ok {
			break
		}
		apply(slowState, ev)
	}

	// The runtime's truth, in the same terms.
	truth := learned{}
	sandboxes, _ := rt.ListPodSandbox(t.Context(), nil)
	for _, sb := range sandboxes {
		apply(truth, Event{PodUID: sb.Metadata.Uid, ContainerID: sb.Id, Type: ContainerStarted})
	}
	containers, _ := rt.ListContainers(t.Context(), nil)
	for _, c := range containers {
		typ := ContainerStarted
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			typ = ContainerDied
		}
		apply(truth, Event{PodUID: c.Labels["io.kubernetes.pod.uid"], ContainerID: c.Id, Type: typ})
	}
	for name, got := range map[string]learned{"slow": slowState, "fast": fastState} {
		for uid, want := range truth {
			if !mapsEqual(got[uid], want) {
				t.Errorf("%s subscriber: pod %s learned %v, runtime has %v", name, uid, got[uid], want)
			}
		}
		if len(got) != len(truth) {
			t.Errorf("%s subscriber learned %d pods, runtime has %d", name, len(got), len(truth))
		}
	}
	if n := testutil.ToFloat64(e.g.metrics.CoalescedEvents); n == 0 {
		t.Error("nothing was coalesced")
	} else {
		t.Logf("coalesced %v events", n)
	}
}

func mapsEqual(a, b map[string]EventType) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestEventsAreCountedByType checks pleg_events_total: every event the
// generator produced, by type, those of a subscriber that coalesced them
// included; every type from the start.
func TestEventsAreCountedByType(t *testing.T) {
	f := newTestFanout(t)
	for _, typ := range []EventType{ContainerStarted, ContainerDied, ContainerRemoved, PodSync, ConditionMet} {
		if n := testutil.ToFloat64(f.metrics.Events.WithLabelValues(string(typ))); n != 0 {
			t.Errorf("%s: %v before any event", typ, n)
		}
	}
	lagging := f.subscribe()
	defer lagging.Close()
	publishChange(f, change("u1", "a:none>run", "b:none>exit"))
	publishChange(f, change("u1", "a:run>exit", "b:exit>none"))
	publishChange(f, change("u1", "a:unk>unk")) // ContainerChanged: not an event the kubelet's consumers get
	sync := change("u2")
	sync.podSync, sync.conditionMet = true, true
	publishChange(f, sync)
	want := map[EventType]float64{ContainerStarted: 1, ContainerDied: 2, ContainerRemoved: 1, PodSync: 1, ConditionMet: 1}
	for typ, n := range want {
		if got := testutil.ToFloat64(f.metrics.Events.WithLabelValues(string(typ))); got != n {
			t.Errorf("%s: counted %v, want %v", typ, got, n)
		}
	}
	if n := testutil.CollectAndCount(f.metrics.Events); n != len(want) {
		t.Errorf("%d types counted, want %d", n, len(want))
	}
}

func publishChange(f *fanout, c *podChange) { f.publish(c, c.events()) }
