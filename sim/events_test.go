// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// runPod runs a sandbox through the client and returns its ID.
func runPod(t *testing.T, client runtimeapi.RuntimeServiceClient, name string) string {
	t.Helper()
	resp, err := client.RunPodSandbox(testContext(t), &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig(name, "uid-"+name)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPodSandboxId()
}

func recvIDs(t *testing.T, stream runtimeapi.RuntimeService_GetContainerEventsClient, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.GetContainerEventType().String()+" "+ev.GetContainerId())
	}
	return ids
}

// containerd keeps the events made while no one subscribes and hands them
// all to the first subscriber; later subscribers get only new events.
func TestEventBacklogGoesToFirstSubscriberOnly(t *testing.T) {
	s := startSim(t, Options{})
	client := dial(t, s)
	ctx := testContext(t)

	a := runPod(t, client, "a")
	b := runPod(t, client, "b")
	if got := s.Stats().EventsBacklog; got != 4 {
		t.Fatalf("backlog %d, want 4", got)
	}
	first := subscribe(t, s, client, ctx)
	want := []string{"CONTAINER_CREATED_EVENT " + a, "CONTAINER_STARTED_EVENT " + a, "CONTAINER_CREATED_EVENT " + b, "CONTAINER_STARTED_EVENT " + b}
	if got := recvIDs(t, first, 4); !equal(got, want) {
		t.Fatalf("first subscriber got %v, want the backlog %v", got, want)
	}
	second := subscribe(t, s, client, ctx)
	c := runPod(t, client, "c")
	want = []string{"CONTAINER_CREATED_EVENT " + c, "CONTAINER_STARTED_EVENT " + c}
	if got := recvIDs(t, first, 2); !equal(got, want) {
		t.Errorf("first subscriber got %v, want %v", got, want)
	}
	if got := recvIDs(t, second, 2); !equal(got, want) {
		t.Errorf("second subscriber got %v, want only the new events %v", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// smallWindow keeps the client from buffering megabytes of events it
// does not read, so that the runtime feels a slow subscriber soon.
func smallWindow() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)}
}

// In containerd mode a subscriber that does not read stalls the runtime:
// the queue waits for it, and so do the changes that emit events — churn
// and CRI calls alike — until it reads again.
func TestSlowSubscriberStallsContainerd(t *testing.T) {
	// The churn moves only when the test steps it: a churn of its own
	// would go on publishing while the test waits for the reader to catch
	// up, which a reader on a busy machine never does.
	s := startSim(t, Options{Pods: 20, Containers: 3, Churn: Churn{ShortLived: 300}, Clock: steppedClock{}})
	client := dial(t, s, smallWindow()...)
	ctx := testContext(t)
	events := subscribe(t, s, client, ctx)

	// The churn steps until it is told to stop; once the client's window
	// and the server's write quota are full, a step waits for the reader.
	var steps atomic.Int64
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.Step()
			steps.Add(1)
		}
	}()
	var lastSent uint64
	still := 0
	eventually(t, "the queue to stall on the subscriber", func() bool {
		st := s.Stats()
		if st.EventsStalled && st.PublishersWaiting >= 1 && st.EventsSent == lastSent {
			still++
		} else {
			still = 0
		}
		lastSent = st.EventsSent
		return still >= 10
	})
	stalledAt := steps.Load()

	// A CRI call that emits events now waits too.
	done := make(chan error, 1)
	go func() {
		_, err := client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("late", "uid-late")})
		done <- err
	}()
	eventually(t, "RunPodSandbox to wait for the queue", func() bool {
		select {
		case err := <-done:
			t.Fatalf("RunPodSandbox returned (%v) while the subscriber was not reading; %+v", err, s.Stats())
		default:
		}
		return s.Stats().PublishersWaiting >= 2
	})
	if n := steps.Load(); n != stalledAt {
		t.Fatalf("the churn stepped on (%d steps, stalled at %d) while the subscriber was not reading", n, stalledAt)
	}

	// Reading releases everything, and nothing was lost.
	var received atomic.Uint64
	var sawLate atomic.Bool
	go func() {
		for {
			ev, err := events.Recv()
			if err != nil {
				return
			}
			received.Add(1)
			if ev.GetPodSandboxStatus().GetMetadata().GetName() == "late" {
				sawLate.Store(true)
			}
		}
	}()
	close(stop)
	<-churned
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, "every event received", func() bool { return received.Load() == s.Stats().EventsPublished })
	st := s.Stats()
	if steps.Load() <= stalledAt {
		t.Errorf("the stalled step never finished: %d steps, stalled at %d", steps.Load(), stalledAt)
	}
	if st.EventsDropped != 0 || st.EventsDiscarded != 0 || !sawLate.Load() {
		t.Errorf("dropped %d, discarded %d events; saw the late pod: %v", st.EventsDropped, st.EventsDiscarded, sawLate.Load())
	}
}

// In CRI-O mode a subscriber that does not read stalls nothing: events
// past the queue's 1000 are dropped and counted.
func TestSlowSubscriberDropsCRIO(t *testing.T) {
	s := startSim(t, Options{Pods: 20, Containers: 3, Churn: Churn{ShortLived: 2000}, Events: EventsCRIO, Clock: steppedClock{}})
	client := dial(t, s, smallWindow()...)
	ctx := testContext(t)
	events := subscribe(t, s, client, ctx)
	// Step until the queue overflows; in containerd mode the first step
	// past the subscriber's window would block instead.
	deadline := giveUp(t)
	for s.Stats().EventsDropped == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no event dropped: %+v", s.Stats())
		}
		s.Step()
	}
	if _, err := client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("late", "uid-late")}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.EventsDropped == 0 || st.PublishersWaiting != 0 {
		t.Fatalf("dropped %d, waiting %d: want drops and no waiting", st.EventsDropped, st.PublishersWaiting)
	}
	// What was not dropped is still delivered, in order.
	if _, err := events.Recv(); err != nil {
		t.Fatal(err)
	}
}

// CRI-O with events off ends the stream at once: the client sees EOF.
func TestEventsOff(t *testing.T) {
	s := startSim(t, Options{Pods: 1, Containers: 1, Events: EventsOff})
	client := dial(t, s)
	stream, err := client.GetContainerEvents(testContext(t), &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv: %v, want EOF", err)
	}
	runPod(t, client, "a")
	if st := s.Stats(); st.EventsPublished != 0 {
		t.Fatalf("published %d events with events off", st.EventsPublished)
	}
}

// The containerd queue itself: a subscriber that does not read takes 100
// events, then the queue, and the publishers behind it, wait for it.
func TestContainerdQueueWaitsForFullSubscriber(t *testing.T) {
	var stats eventStats
	q := newQueue(EventsContainerd, clock.RealClock{}, &stats)
	defer q.shutdown()
	c, cancel, ok := q.subscribe(testContext(t))
	if !ok {
		t.Fatal("no subscription")
	}
	defer cancel()
	for range containerdSubscriberBuffer + 1 { // the buffer, and one in the queue's hands
		q.publish(&event{})
	}
	published := make(chan struct{})
	go func() {
		q.publish(&event{})
		close(published)
	}()
	eventually(t, "the publisher to wait", func() bool { return stats.stalled.Load() && stats.waiting.Load() == 1 })
	select {
	case <-published:
		t.Fatal("published past a full subscriber")
	default:
	}
	for range containerdSubscriberBuffer + 2 {
		<-c
	}
	<-published
}
