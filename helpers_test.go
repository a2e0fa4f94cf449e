// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// Shorthands for scripting the fake runtime.
const (
	running  = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited   = runtimeapi.ContainerState_CONTAINER_EXITED
	created  = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown  = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

var testStart = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// testEnv is a generator over a fake runtime with a fake clock, watched.
type testEnv struct {
	t     testing.TB
	rt    *fakeruntime.Runtime
	clock *testingclock.FakeClock
	cache *podcache.Cache
	reg   *prometheus.Registry
	g     *Generator
	ch    <-chan Event
}

type envOption func(*Options)

func withCapacity(n int) envOption    { return func(o *Options) { o.ChannelCapacity = n } }
func withConcurrency(n int) envOption { return func(o *Options) { o.InspectConcurrency = n } }

func newEnv(t testing.TB, rt *fakeruntime.Runtime, opts ...envOption) *testEnv {
	t.Helper()
	e := &testEnv{
		t:     t,
		rt:    rt,
		clock: testingclock.NewFakeClock(testStart),
		cache: podcache.New(),
		reg:   prometheus.NewRegistry(),
	}
	o := Options{
		RelistPeriod:    time.Second,
		RelistThreshold: 3 * time.Minute,
		ChannelCapacity: 100,
		Cache:           e.cache,
		Clock:           e.clock,
		Logger:          slog.New(slog.DiscardHandler),
		Registerer:      e.reg,
	}
	for _, opt := range opts {
		opt(&o)
	}
	g, err := New(rt, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.g, e.ch = g, g.Watch()
	return e
}

// relist runs one global relist at the next clock second, so that every
// relist has its own timestamp, and returns the events it sent.
func (e *testEnv) relist() []Event {
	e.t.Helper()
	e.clock.Step(time.Second)
	if err := e.g.Relist(e.t.Context()); err != nil {
		e.t.Fatalf("Relist: %v", err)
	}
	return drain(e.ch)
}

// drain returns what is in ch without waiting.
func drain(ch <-chan Event) []Event {
	var out []Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// ev is an event reduced to what the kubelet's tests compare.
type ev struct {
	pod  string
	typ  EventType
	data string
}

func (e ev) String() string { return fmt.Sprintf("%s(%s,%s)", e.typ, e.pod, e.data) }

// reduce sorts events by pod then container ID, as the kubelet's tests do;
// the sort is stable, so a container's Died stays before its Removed.
func reduce(events []Event) []ev {
	out := make([]ev, 0, len(events))
	for _, e := range events {
		out = append(out, ev{e.PodUID, e.Type, e.ContainerID})
	}
	slices.SortStableFunc(out, func(a, b ev) int {
		return cmp.Or(cmp.Compare(a.pod, b.pod), cmp.Compare(a.data, b.data))
	})
	return out
}

func assertEvents(t testing.TB, got []Event, want ...ev) {
	t.Helper()
	r := reduce(got)
	if len(want) == 0 {
		want = []ev{}
	}
	if !slices.Equal(r, want) {
		t.Errorf("events:\n got  %v\n want %v", r, want)
	}
}

// Event constructors for expectations.
func startedEv(pod, id string) ev { return ev{pod, ContainerStarted, id} }
func diedEv(pod, id string) ev    { return ev{pod, ContainerDied, id} }
func removedEv(pod, id string) ev { return ev{pod, ContainerRemoved, id} }
func podSyncEv(pod string) ev     { return ev{pod, PodSync, ""} }

// pod scripts a pod without sandboxes, as the kubelet's relist tests do.
func pod(uid string, containers ...fakeruntime.Container) fakeruntime.Pod {
	return fakeruntime.Pod{UID: uid, Name: "pod-" + uid, Namespace: "ns", Containers: containers}
}

func ctr(id string, state runtimeapi.ContainerState) fakeruntime.Container {
	return fakeruntime.Container{ID: id, Name: "name-" + id, State: state}
}

func sbx(id string, state runtimeapi.PodSandboxState) fakeruntime.Sandbox {
	return fakeruntime.Sandbox{ID: id, State: state}
}

// sandboxPod scripts a pod made of sandboxes only.
func sandboxPod(uid string, sandboxes ...fakeruntime.Sandbox) fakeruntime.Pod {
	return fakeruntime.Pod{UID: uid, Name: "pod-" + uid, Namespace: "ns", Sandboxes: sandboxes}
}
