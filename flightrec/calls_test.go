// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// fakeRuntime lists what the test sets; its ContainerStatus waits for
// release; its event stream delivers what the test sends.
type fakeRuntime struct {
	mu         sync.Mutex
	containers []*runtimeapi.Container
	release    chan struct{}
	events     chan *runtimeapi.ContainerEventResponse
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return nil, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.containers, nil
}

func (f *fakeRuntime) PodSandboxStatus(context.Context, string, bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	return &runtimeapi.PodSandboxStatusResponse{}, nil
}

func (f *fakeRuntime) ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error) {
	<-f.release
	return &runtimeapi.ContainerStatusResponse{}, nil
}

func (f *fakeRuntime) GetContainerEvents(context.Context) (runtime.EventStream, error) {
	return fakeStream(f.events), nil
}

type fakeStream chan *runtimeapi.ContainerEventResponse

func (s fakeStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	ev, ok := <-s
	if !ok {
		return nil, io.EOF
	}
	return ev, nil
}

func (f *fakeRuntime) set(states ...runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = nil
	for i, s := range states {
		f.containers = append(f.containers, &runtimeapi.Container{Id: string(rune('a' + i)), State: s})
	}
}

func TestCallsInFlight(t *testing.T) {
	clock := &stepClock{t: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock.now() }
	c := NewCalls(now)
	f := &fakeRuntime{release: make(chan struct{})}
	rt := c.Wrap(f)
	if _, ok := rt.(runtime.EventSource); !ok {
		t.Fatal("the wrapped runtime hides its event stream")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = rt.ContainerStatus(t.Context(), "c1", false)
	}()
	for len(c.InFlight(now())) == 0 {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	clock.t = clock.t.Add(90 * time.Second)
	mu.Unlock()
	in := c.InFlight(now())
	if len(in) != 1 || in[0].Op != runtime.OpContainerStatus || in[0].ID != "c1" || in[0].Seconds != 90 {
		t.Errorf("in flight %+v, want container_status c1 for 90 s", in)
	}
	close(f.release)
	<-done
	if in := c.InFlight(now()); len(in) != 0 {
		t.Errorf("in flight after it returned: %+v", in)
	}
	if r := c.Recent(); len(r) != 1 || r[0].ID != "c1" {
		t.Errorf("recent %+v", r)
	}
	if _, err := rt.ListPodSandbox(t.Context(), runtime.PodSandboxFilterForPod("u1")); err != nil {
		t.Fatal(err)
	}
	if r := c.Recent(); r[len(r)-1].ID != "pod=u1" {
		t.Errorf("one pod's list: %+v, want it named pod=u1", r[len(r)-1])
	}
	for range recentCalls + 5 {
		_, _ = rt.PodSandboxStatus(t.Context(), "s", false)
	}
	if r := c.Recent(); len(r) != recentCalls || r[len(r)-1].Op != runtime.OpPodSandboxStatus {
		t.Errorf("recent: %d calls, want the last %d", len(r), recentCalls)
	}
}

func TestCallsStreamSilentWhileListsChange(t *testing.T) {
	clock := &stepClock{t: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock.now() }
	advance := func(d time.Duration) { mu.Lock(); clock.t = clock.t.Add(d); mu.Unlock() }
	c := NewCalls(now)
	f := &fakeRuntime{events: make(chan *runtimeapi.ContainerEventResponse, 1)}
	rt := c.Wrap(f)
	stream, err := rt.(runtime.EventSource).GetContainerEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	list := func() {
		if _, err := rt.ListContainers(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	f.set(runtimeapi.ContainerState_CONTAINER_RUNNING)
	list()
	advance(time.Second)
	list()
	if !c.Unexplained().IsZero() {
		t.Fatal("no change, yet unexplained")
	}
	// A change the stream told: explained.
	f.events <- &runtimeapi.ContainerEventResponse{ContainerId: "a"}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	advance(time.Second)
	f.set(runtimeapi.ContainerState_CONTAINER_EXITED)
	list()
	if !c.Unexplained().IsZero() {
		t.Errorf("a change the stream told is unexplained since %v", c.Unexplained())
	}
	// A change it did not tell.
	advance(time.Second)
	changed := now()
	f.set(runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING)
	list()
	if got := c.Unexplained(); !got.Equal(changed) {
		t.Errorf("unexplained since %v, want %v", got, changed)
	}
	// The stream ends: nothing is expected of it any more.
	close(f.events)
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the stream did not end")
	}
	if !c.Unexplained().IsZero() || c.Stream().Open {
		t.Errorf("after the stream ended: unexplained %v, open %t", c.Unexplained(), c.Stream().Open)
	}
}
