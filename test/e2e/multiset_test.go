// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime/cri"
)

// TestEventedMultiset: one scripted workload with churn and cleanup, under
// two generators at once: one relisting every second, the kubelet's
// generic PLEG, and one driven by the runtime's event stream, global
// relists an hour apart. Evented mode must lose nothing and invent
// nothing: per container (and sandbox) and event type, it reports what the
// relist reports, plus only the starts and deaths of lives too short for
// a relist to see. It logs the counts by type of both, and how long after
// each RemovePodSandbox (and RemoveContainer) returned the evented
// generator told the removal.
func TestEventedMultiset(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		if !in.Spec.HasEvents() {
			t.Skipf("%s has no event stream: its evented mode relists, as the generic one does", in.Spec)
		}
		gen := watch(t, in, pleg.Options{Mode: pleg.ModeGeneric, RelistPeriod: time.Second})
		ev := evented(t, in)

		w := runWorkload(t, in, 8)
		// The relist sees every removal within a second or two; so must
		// the stream, without a global relist.
		var last string
		settled := func() bool {
			last = compareMultisets(gen.all(), ev.all(), w.pods)
			return last == "" && gen.gone(w.ids()) && gen.allRemoved(w.pods)
		}
		deadline := time.Now().Add(time.Minute)
		for !settled() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: evented events never matched the generic ones:\n%s\ngeneric %s\nevented %s",
					in.Spec, last, countTypes(gen.all(), w.pods), countTypes(ev.all(), w.pods))
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Nothing more comes of a relist of either.
		must(t, gen.gen.Relist(ctx(t)))
		if d := compareMultisets(gen.all(), ev.all(), w.pods); d != "" {
			t.Errorf("%s: after a relist:\n%s", in.Spec, d)
		}
		t.Logf("%s: generic %s", in.Spec, countTypes(gen.all(), w.pods))
		t.Logf("%s: evented %s", in.Spec, countTypes(ev.all(), w.pods))
		t.Logf("%s: removal told %s after RemovePodSandbox returned, %s after RemoveContainer",
			in.Spec, w.latency(ev, true), w.latency(ev, false))
		checkMode(t, in, ev)
	})
}

// workload is what runWorkload did: its pods, and when each removal call
// returned, by the ID it removed.
type workload struct {
	pods map[string]bool // UIDs

	mu        sync.Mutex
	sandboxes []string
	removed   map[string]time.Time
	podOf     map[string]bool // sandbox IDs, for latency
}

func (w *workload) ids() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.sandboxes)
}

func (w *workload) removedAt(id string, sandbox bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removed[id] = time.Now()
	if sandbox {
		w.podOf[id] = true
	}
}

// latency is the p50 and maximum of how long after each removal call of
// the kind (RemovePodSandbox, or RemoveContainer) its ContainerRemoved
// reached w's subscriber.
func (w *workload) latency(ev *watcher, sandboxes bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var took []time.Duration
	for id, at := range w.removed {
		if w.podOf[id] != sandboxes {
			continue
		}
		if got, ok := ev.receivedAt(id, pleg.ContainerRemoved); ok {
			took = append(took, got.Sub(at))
		}
	}
	if len(took) == 0 {
		return "(none)"
	}
	slices.Sort(took)
	return fmt.Sprintf("p50 %v, max %v (%d)", took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took))
}

// runWorkload runs pods pods of two containers each, side by side, each
// through the same script: a crash-looping container restarted twice, a
// job that fails and is removed, a container that exits at once and is
// removed at once (a life too short for a relist), then the pod stopped
// and removed, as the kubelet does.
func runWorkload(t *testing.T, in *runtimetest.Instance, pods int) *workload {
	t.Helper()
	w := &workload{pods: map[string]bool{}, removed: map[string]time.Time{}, podOf: map[string]bool{}}
	var wg sync.WaitGroup
	errs := make(chan error, pods)
	for i := range pods {
		pod := newPod(fmt.Sprintf("multiset-%02d", i))
		w.pods[pod.UID] = true
		wg.Go(func() {
			if err := w.script(ctx(t), in, pod); err != nil {
				errs <- fmt.Errorf("%s: %w", pod.Name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return w
}

func (w *workload) script(ctx context.Context, in *runtimetest.Instance, pod runtimetest.PodSpec) error {
	sb, err := in.RunPod(ctx, pod)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.sandboxes = append(w.sandboxes, sb)
	w.mu.Unlock()
	app, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
	if err != nil {
		return err
	}
	if _, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: "side", Args: sleeping}); err != nil {
		return err
	}
	// The app crashes and restarts, twice: stopped, the previous attempt
	// removed once the next one runs, as the kubelet's collector does.
	for attempt := uint32(1); attempt <= 2; attempt++ {
		if err := in.StopContainer(ctx, app, 0); err != nil {
			return err
		}
		next, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: "app", Attempt: attempt, Args: sleeping})
		if err != nil {
			return err
		}
		if err := w.removeContainer(ctx, in, app); err != nil {
			return err
		}
		app = next
	}
	// A job fails after a while, and is removed.
	job, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: "job", Args: []string{"exit", "3", "300ms"}})
	if err != nil {
		return err
	}
	if err := waitExited(ctx, in, job); err != nil {
		return err
	}
	if err := w.removeContainer(ctx, in, job); err != nil {
		return err
	}
	// A container lives and goes at once.
	flash, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: "flash", Args: []string{"exit", "0"}})
	if err != nil {
		return err
	}
	if err := waitExited(ctx, in, flash); err != nil {
		return err
	}
	if err := w.removeContainer(ctx, in, flash); err != nil {
		return err
	}
	// Cleanup, as the kubelet does it: stop, then remove.
	if err := in.StopPod(ctx, sb); err != nil {
		return err
	}
	if err := in.RemovePod(ctx, sb); err != nil {
		return err
	}
	w.removedAt(sb, true)
	return nil
}

func (w *workload) removeContainer(ctx context.Context, in *runtimetest.Instance, id string) error {
	if err := in.RemoveContainer(ctx, id); err != nil {
		return err
	}
	w.removedAt(id, false)
	return nil
}

// waitExited waits until container id has exited.
func waitExited(ctx context.Context, in *runtimetest.Instance, id string) error {
	for {
		st, err := in.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			return err
		}
		if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %.12s to exit: %w", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// eventKey is what the multisets count: a pod's container (or sandbox)
// and an event type.
type eventKey struct {
	pod, id string
	typ     pleg.EventType
}

// multiset counts the events of pods.
func multiset(events []pleg.Event, pods map[string]bool) map[eventKey]int {
	m := map[eventKey]int{}
	for _, e := range events {
		if pods[e.PodUID] {
			m[eventKey{e.PodUID, e.ContainerID, e.Type}]++
		}
	}
	return m
}

// compareMultisets returns what the evented events get wrong against the
// generic ones, or "": per container, the same count of each type, but
// for the starts and deaths of a life a relist could not see whole. A
// container the relist never saw is a short life the stream alone saw:
// started, died and removed, once each. One it saw exited, never running,
// may have one Started more.
func compareMultisets(generic, evented []pleg.Event, pods map[string]bool) string {
	g, e := multiset(generic, pods), multiset(evented, pods)
	type item struct{ pod, id string }
	items := map[item]bool{}
	for k := range g {
		items[item{k.pod, k.id}] = true
	}
	for k := range e {
		items[item{k.pod, k.id}] = true
	}
	var problems []string
	for _, it := range slices.SortedFunc(maps.Keys(items), func(a, b item) int { return strings.Compare(a.pod+a.id, b.pod+b.id) }) {
		count := func(m map[eventKey]int, typ pleg.EventType) int { return m[eventKey{it.pod, it.id, typ}] }
		gs, gd, gr := count(g, S), count(g, D), count(g, R)
		es, ed, er := count(e, S), count(e, D), count(e, R)
		ok := false
		switch gs + gd + gr {
		case 0:
			ok = es == 1 && ed == 1 && er == 1
		default:
			ok = er == gr && ed == gd && (es == gs || gs == 0 && es == 1)
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("  %.12s of pod %.8s: generic S%d D%d R%d, evented S%d D%d R%d", it.id, it.pod, gs, gd, gr, es, ed, er))
		}
	}
	return strings.Join(problems, "\n")
}

// countTypes counts the events of pods by type.
func countTypes(events []pleg.Event, pods map[string]bool) string {
	n := map[pleg.EventType]int{}
	for k, c := range multiset(events, pods) {
		n[k.typ] += c
	}
	return fmt.Sprintf("Started %d, Died %d, Removed %d", n[S], n[D], n[R])
}

// gone reports whether every sandbox in ids was reported removed.
func (w *watcher) gone(ids []string) bool {
	removed := map[string]bool{}
	for _, e := range w.all() {
		if e.Type == R {
			removed[e.ContainerID] = true
		}
	}
	for _, id := range ids {
		if !removed[id] {
			return false
		}
	}
	return true
}

// allRemoved reports whether w has told the removal of every item of pods
// it told anything of. The generic relist tells a pod's containers removed
// a relist or two after its sandbox when the runtime removes them in
// turn: until then a relist of it still has events to come.
func (w *watcher) allRemoved(pods map[string]bool) bool {
	seen, removed := map[string]bool{}, map[string]bool{}
	for _, e := range w.all() {
		if pods[e.PodUID] {
			seen[e.ContainerID] = true
			removed[e.ContainerID] = removed[e.ContainerID] || e.Type == R
		}
	}
	for id := range seen {
		if !removed[id] {
			return false
		}
	}
	return true
}

// TestRemovalEvents: what each runtime's event stream tells of removals is
// what cri.KnownRemovalEvents says of it: a container removed by
// RemoveContainer, and a pod removed by RemovePodSandbox (its sandbox and
// the containers left in it). The events of a pod's whole life are
// logged.
func TestRemovalEvents(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		if !in.Spec.HasEvents() {
			t.Skipf("%s has no event stream", in.Spec)
		}
		rec := recordStream(t, in)
		pod := newPod("removals")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		app, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		job, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "job", Args: []string{"exit", "1"}})
		must(t, err)
		must(t, waitExited(ctx(t), in, job))
		must(t, in.RemoveContainer(ctx(t), job))
		must(t, in.StopPod(ctx(t), sb))
		must(t, in.RemovePod(ctx(t), sb))
		// A pod after it: once its events came, the stream has sent all it
		// would of the first.
		marker := newPod("marker")
		msb, err := in.RunPod(ctx(t), marker)
		must(t, err)
		wait(t, "the marker pod's events", func() bool { return len(rec.of(msb)) > 0 })
		must(t, errors.Join(in.StopPod(ctx(t), msb), in.RemovePod(ctx(t), msb)))

		names := map[string]string{sb: "sandbox", app: "app", job: "job"}
		var life []string
		for _, e := range rec.all() {
			if name, ok := names[e.GetContainerId()]; ok {
				life = append(life, name+" "+strings.TrimSuffix(strings.TrimPrefix(e.GetContainerEventType().String(), "CONTAINER_"), "_EVENT"))
			}
		}
		t.Logf("%s: %s", in.Spec, strings.Join(life, ", "))
		deleted := func(id string) bool {
			return slices.ContainsFunc(rec.of(id), func(e *runtimeapi.ContainerEventResponse) bool {
				return e.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
			})
		}
		containers, pods := cri.KnownRemovalEvents(runtimeName(in.Spec))
		if told := deleted(job); told != (containers.Availability == "supported") {
			t.Errorf("%s: RemoveContainer told %v; known: %s", in.Spec, told, containers)
		}
		if told := deleted(sb) || deleted(app); told != (pods.Availability == "supported") {
			t.Errorf("%s: RemovePodSandbox told %v (sandbox %v, its container %v); known: %s", in.Spec, told, deleted(sb), deleted(app), pods)
		}
	})
}

// streamRecord is the raw event stream of a runtime, as a bare client
// reads it.
type streamRecord struct {
	mu     sync.Mutex
	events []*runtimeapi.ContainerEventResponse
}

func recordStream(t *testing.T, in *runtimetest.Instance) *streamRecord {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	stream, err := in.Runtime.GetContainerEvents(c, &runtimeapi.GetEventsRequest{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &streamRecord{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}
	})
	return r
}

func (r *streamRecord) all() []*runtimeapi.ContainerEventResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// of returns the events about id.
func (r *streamRecord) of(id string) []*runtimeapi.ContainerEventResponse {
	var out []*runtimeapi.ContainerEventResponse
	for _, e := range r.all() {
		if e.GetContainerId() == id {
			out = append(out, e)
		}
	}
	return out
}
