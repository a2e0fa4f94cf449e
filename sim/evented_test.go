// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/trace"
	"github.com/plegkit/pleg/runtime/cri"
)

// The generator in evented operation over the simulator's event stream,
// through the CRI adapter. The churn ticks only when a test steps it; the
// clock is otherwise the real one, as the stream's timestamps and ours
// must agree.

// steppedClock is the real clock without tickers: the churn never ticks on
// its own.
type steppedClock struct{ clock.RealClock }

func (steppedClock) NewTicker(time.Duration) clock.Ticker { return stoppedTicker{} }

type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

type eventedRun struct {
	t      *testing.T
	sim    *Sim
	client runtimeapi.RuntimeServiceClient // the test's own, to read the truth
	gen    *pleg.Generator
	reg    *prometheus.Registry

	mu  sync.Mutex
	got map[string][]pleg.EventType
	// stages are the stages each ID's events passed in the generator,
	// and logs its debug log, both for a failure to say what happened.
	stages map[string][]string
	logs   []string
}

// maxLogs bounds the debug log a run keeps: the newest are kept.
const maxLogs = 20000

// Handle keeps the generator's log lines, for converged to show those of
// the item that never converged.
func (r *eventedRun) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Time.Format("15:04:05.000000 ") + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.logs) == maxLogs {
		r.logs = slices.Delete(r.logs, 0, maxLogs/2)
	}
	r.logs = append(r.logs, b.String())
	return nil
}

func (r *eventedRun) Enabled(context.Context, slog.Level) bool { return true }
func (r *eventedRun) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *eventedRun) WithGroup(string) slog.Handler            { return r }

// trace keeps the stages of each ID's events.
func (r *eventedRun) trace(stage trace.Stage, id, typ string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stages[id] = append(r.stages[id], at.Format("15:04:05.000000 ")+typ+" "+stage.String())
}

// story tells what is known of id: what the runtime did to it, the events
// reported and the stages they passed, and the log lines naming it or its
// pod.
func (r *eventedRun) story(id string) string {
	hist := r.sim.History()
	pod := ""
	for _, ch := range hist {
		if ch.ContainerID == id || ch.SandboxID == id {
			pod = ch.PodUID
		}
	}
	status := r.gen.Status()
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\nuntold removals %q\n%s of pod %s: %s\nevents %v",
		status, status.UntoldRemovals, id, pod, describe(hist, id), r.got[id])
	for _, s := range r.stages[id] {
		b.WriteString("\n  " + s)
	}
	for _, l := range r.logs {
		if strings.Contains(l, id) || pod != "" && strings.Contains(l, pod) {
			b.WriteString("\n  log: " + l)
		}
	}
	return b.String()
}

func startEvented(t *testing.T, opts Options, gopts pleg.Options) *eventedRun {
	t.Helper()
	opts.Clock = steppedClock{}
	s := startSim(t, opts)
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), RequestTimeout: 5 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	gopts.RelistPeriod = time.Second
	if gopts.EventedRelistPeriod == 0 {
		gopts.EventedRelistPeriod = time.Hour
		gopts.EventedRelistThreshold = 2 * time.Hour
	}
	r := &eventedRun{t: t, sim: s, client: dial(t, s), reg: prometheus.NewRegistry(),
		got: map[string][]pleg.EventType{}, stages: map[string][]string{}}
	gopts.Logger = slog.New(r)
	gopts.Registerer = r.reg
	gopts.Trace = r.trace
	g, err := pleg.New(rt, gopts)
	if err != nil {
		t.Fatal(err)
	}
	r.gen = g
	sub := g.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.got[ev.ContainerID] = append(r.got[ev.ContainerID], ev.Type)
			r.mu.Unlock()
		}
	}()
	g.Start()
	t.Cleanup(func() {
		g.Stop()
		cancel()
		<-done
		sub.Close()
	})
	return r
}

func (r *eventedRun) events() map[string][]pleg.EventType {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]pleg.EventType, len(r.got))
	for id, evs := range r.got {
		out[id] = slices.Clone(evs)
	}
	return out
}

func (r *eventedRun) waitEvented() {
	r.t.Helper()
	eventually(r.t, "the stream to drive", func() bool { return r.gen.Status().Evented })
}

// churn steps the workload n times, a little apart, as a live node would.
// The generator may fall behind: a relist can see a container's state
// before the stream delivered the events that led there.
func (r *eventedRun) churn(n int) {
	for range n {
		r.sim.Step()
		time.Sleep(20 * time.Millisecond)
	}
}

// churnInStep steps the workload n times, each step once the events
// delivered say what the runtime holds: whatever the machine's load, every
// change reaches the generator through the stream before the next one is
// made, so that each of them must come out as its event. One step changes
// a container once at most (a container starts in one tick and exits in a
// later one). missedOK is converged's: containers gone before the stream
// drove may have no events.
func (r *eventedRun) churnInStep(n int, missedOK bool) {
	for range n {
		r.sim.Step()
		r.converged(missedOK)
	}
}

// stateOf is what a container's or sandbox's last event says of it.
func stateOf(evs []pleg.EventType) string {
	if len(evs) == 0 {
		return "unseen"
	}
	switch evs[len(evs)-1] {
	case pleg.ContainerStarted:
		return "running"
	case pleg.ContainerDied:
		return "exited"
	default:
		return "gone"
	}
}

// truth is the runtime's state of every ID it ever had.
func (r *eventedRun) truth() map[string]string {
	r.t.Helper()
	ctx := testContext(r.t)
	client := r.client
	state := map[string]string{}
	for _, ch := range r.sim.History() {
		for _, id := range []string{ch.ContainerID, ch.SandboxID} {
			if id != "" {
				state[id] = "gone"
			}
		}
	}
	sbs, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, sb := range sbs.Items {
		state[sb.Id] = map[bool]string{true: "running", false: "exited"}[sb.State == runtimeapi.PodSandboxState_SANDBOX_READY]
	}
	cs, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, c := range cs.Containers {
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			state[c.Id] = "running"
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			state[c.Id] = "exited"
		default:
			state[c.Id] = "unseen" // created: the kubelet's table reports nothing
		}
	}
	return state
}

// converged waits until every ID's last event says what the runtime holds.
// A container that lived and went while the stream was down may have no
// event at all.
func (r *eventedRun) converged(missedOK bool) {
	r.t.Helper()
	var last, lastID string
	deadline := giveUp(r.t)
	for time.Now().Before(deadline) {
		truth, got := r.truth(), r.events()
		last = ""
		for _, id := range slices.Sorted(maps.Keys(truth)) {
			want, have := truth[id], stateOf(got[id])
			if want != have && (!missedOK || want != "gone" || have != "unseen") {
				last, lastID = id+": runtime "+want+", events say "+have, id
				break
			}
		}
		if last == "" {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("never converged: %s%s", last, r.story(lastID))
}

// TestEventedOverSimulator: with the stream driving and global relists an
// hour apart, the churn's events arrive through the stream, every one of
// them, short-lived containers included; on a runtime that sends no event
// when a pod is removed (CRI-O), the removal watch finds those removals.
func TestEventedOverSimulator(t *testing.T) {
	for _, tc := range []struct {
		events EventMode
		steps  int
		untold []string
	}{
		{EventsContainerd, 100, nil},
		// Each pod removal waits for the watch's list: fewer steps.
		{EventsCRIO, 40, []string{"pod"}},
	} {
		t.Run(tc.events.String(), func(t *testing.T) {
			r := startEvented(t, Options{Pods: 20, Containers: 2, Churn: busyChurn(), Seed: 7, Events: tc.events}, pleg.Options{})
			r.waitEvented()
			globalBefore := r.relists()
			r.churnInStep(tc.steps, false)

			hist := r.sim.History()
			want, got := expectedEvents(hist), r.events()
			for _, id := range slices.Sorted(maps.Keys(want)) {
				if !slices.Equal(got[id], want[id]) {
					t.Errorf("%.12s: events %v, want %v (%s)", id, got[id], want[id], describe(hist, id))
				}
			}
			if n := r.relists() - globalBefore; n > 2 {
				t.Errorf("%d global relists during the churn, want the stream to drive", n)
			}
			// The simulator is not a runtime known to tell removals: the
			// events showed what it tells.
			if s := r.gen.Status(); !s.Evented || !slices.Equal(s.UntoldRemovals, tc.untold) {
				t.Errorf("status %v, untold removals %q", s, s.UntoldRemovals)
			}
		})
	}
}

// relists counts the global relists, as kubelet_pleg_relist_duration_seconds
// does.
func (r *eventedRun) relists() uint64 {
	families, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "kubelet_pleg_relist_duration_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// TestEventedSurvivesDropsAndRestarts: streams cut every 300 ms and a
// runtime restart during the churn lose events, not the final state.
func TestEventedSurvivesDropsAndRestarts(t *testing.T) {
	faults, err := ParseFaults("drop=300ms")
	if err != nil {
		t.Fatal(err)
	}
	r := startEvented(t, Options{Pods: 20, Containers: 2, Churn: busyChurn(), Seed: 8, Faults: faults}, pleg.Options{})
	r.churn(40)
	if err := r.sim.Restart(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	r.churn(40)
	r.converged(true)
	if ok, err := r.gen.Healthy(); !ok {
		t.Errorf("unhealthy after recovering: %v", err)
	}
}

// TestNoStreamThenStream: a runtime that answers Unimplemented is relisted
// every second; when it gains a stream, the stream drives.
func TestNoStreamThenStream(t *testing.T) {
	faults, err := ParseFaults("events=unimplemented")
	if err != nil {
		t.Fatal(err)
	}
	r := startEvented(t, Options{Pods: 5, Containers: 2, Churn: busyChurn(), Seed: 9, Faults: faults},
		pleg.Options{NoStreamRetry: 2 * time.Second})
	eventually(t, "no stream", func() bool { return r.gen.Status().NoStream })
	r.churn(10)
	// Relisting alone misses what lives and goes between two relists.
	r.converged(true)
	if s := r.gen.Status(); s.Evented || s.RelistPeriod != time.Second {
		t.Errorf("status %+v: want relisting every second", s)
	}
	if err := r.sim.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	r.waitEvented()
	mark := len(r.sim.History())
	r.churnInStep(10, true)
	// Since the stream drives, nothing is missed.
	hist := r.sim.History()
	want, got := expectedEvents(hist[mark:]), r.events()
	born := map[string]bool{}
	for _, ch := range hist[mark:] {
		if ch.Op == ChangeCreateContainer || ch.Op == ChangeRunPod {
			born[cmp.Or(ch.ContainerID, ch.SandboxID)] = true
		}
	}
	for id := range born {
		if !slices.Equal(got[id], want[id]) {
			t.Errorf("%.12s, born once the stream drove: events %v, want %v", id, got[id], want[id])
		}
	}
}

// TestBacklogReplay: containerd gives its first subscriber every event
// queued while it had none. What those events tell is past; they must not
// report containers that came and went before the generator started.
func TestBacklogReplay(t *testing.T) {
	s := startSim(t, Options{Pods: 10, Containers: 2, Churn: busyChurn(), Seed: 10, Clock: steppedClock{}})
	for range 30 {
		s.Step() // queued, no subscriber yet
	}
	time.Sleep(10 * time.Millisecond) // the backlog is older than the subscription
	before := len(s.History())

	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	g, err := pleg.New(rt, pleg.Options{RelistPeriod: time.Second, EventedRelistPeriod: time.Hour, EventedRelistThreshold: 2 * time.Hour, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	sub := g.Subscribe()
	defer sub.Close()
	g.Start()
	defer g.Stop()
	eventually(t, "the stream to drive", func() bool { return g.Status().Evented })

	// Every ID reported must exist now: the first relist saw it.
	client := dial(t, s)
	ctx := testContext(t)
	exists := map[string]bool{}
	sbs, _ := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	for _, sb := range sbs.Items {
		exists[sb.Id] = true
	}
	cs, _ := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	for _, c := range cs.Containers {
		exists[c.Id] = true
	}
	if len(s.History()) != before {
		t.Fatal("the runtime changed meanwhile; the test cannot judge")
	}
	for {
		ev, ok := sub.TryNext()
		if !ok {
			break
		}
		if !exists[ev.ContainerID] {
			t.Errorf("reported %s %.12s, which was gone before the generator started", ev.Type, ev.ContainerID)
		}
	}
}
