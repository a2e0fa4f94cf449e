// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

func setFaults(t *testing.T, s *Sim, f Faults) {
	t.Helper()
	if err := s.SetFaults(f); err != nil {
		t.Fatal(err)
	}
}

func listErr(ctx context.Context, client runtimeapi.RuntimeServiceClient) error {
	_, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	return err
}

func streamErr(ctx context.Context, client runtimeapi.RuntimeServiceClient) error {
	stream, err := client.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// Error rates fail exactly the calls of their operation, unary and
// streamed, with the configured code; they apply from the start and
// change at run time.
func TestFaultErrorRate(t *testing.T) {
	s := startSim(t, Options{Pods: 3, Containers: 2, Faults: Faults{ErrorRate: map[string]float64{runtime.OpVersion: 1}}})
	client := dial(t, s)
	ctx := testContext(t)
	if _, err := client.Version(ctx, &runtimeapi.VersionRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Version with error rate 1 from the start: %v", err)
	}

	setFaults(t, s, Faults{ErrorRate: map[string]float64{runtime.OpListContainers: 1}})
	for range 20 {
		if err := listErr(ctx, client); status.Code(err) != codes.Unavailable {
			t.Fatalf("ListContainers with error rate 1: %v, want Unavailable", err)
		}
		if err := streamErr(ctx, client); status.Code(err) != codes.Unavailable {
			t.Fatalf("StreamContainers with error rate 1: %v, want Unavailable", err)
		}
	}
	if _, err := client.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("Version, no longer failing: %v", err)
	}
	if _, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
		t.Fatalf("another operation failed: %v", err)
	}

	setFaults(t, s, Faults{ErrorRate: map[string]float64{"*": 1}, ErrorCode: codes.Internal})
	if _, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("ListPodSandbox with error rate * 1 and code Internal: %v", err)
	}

	setFaults(t, s, Faults{ErrorRate: map[string]float64{runtime.OpListContainers: 0.5}})
	failed := 0
	for range 400 {
		if listErr(ctx, client) != nil {
			failed++
		}
	}
	if failed < 140 || failed > 260 {
		t.Errorf("%d of 400 calls failed at rate 0.5", failed)
	}

	setFaults(t, s, Faults{ErrorRate: map[string]float64{runtime.OpListContainers: 0}})
	for range 50 {
		if err := listErr(ctx, client); err != nil {
			t.Fatalf("ListContainers with error rate 0: %v", err)
		}
	}
}

// A hung operation ends only by the caller's deadline or cancellation.
func TestFaultHang(t *testing.T) {
	s := startSim(t, Options{Pods: 2, Containers: 1})
	client := dial(t, s)
	setFaults(t, s, Faults{Hang: map[string]bool{runtime.OpListContainers: true}})

	// Timed from before the deadline is set: from after, a busy machine
	// lets the deadline pass sooner.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := listErr(ctx, client); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("hung ListContainers: %v, want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Fatalf("hung call ended after %v, before its deadline", elapsed)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := streamErr(ctx2, client); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("hung StreamContainers: %v, want DeadlineExceeded", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	go func() {
		eventually(t, "the call to hang", func() bool { return s.Stats().Calls[runtime.OpListContainers] >= 3 })
		ccancel()
	}()
	if err := listErr(cctx, client); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled hung ListContainers: %v, want Canceled", err)
	}
	if _, err := client.ListPodSandbox(testContext(t), &runtimeapi.ListPodSandboxRequest{}); err != nil {
		t.Fatalf("another operation: %v", err)
	}
	setFaults(t, s, Faults{})
	if err := listErr(testContext(t), client); err != nil {
		t.Fatalf("ListContainers after the hang cleared: %v", err)
	}
}

// A hung pod hangs the status calls of its own sandboxes and containers
// only.
func TestFaultHangPod(t *testing.T) {
	s := startSim(t, Options{Pods: 2, Containers: 2})
	client := dial(t, s)
	ctx := testContext(t)
	sbs, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stuck, fine := sbs.GetItems()[0], sbs.GetItems()[1]
	setFaults(t, s, Faults{HangPod: stuck.GetMetadata().GetUid()})

	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	containersOf := func(sb string) []string {
		resp, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb}})
		if err != nil {
			t.Fatal(err)
		}
		return containerIDs(resp.GetContainers())
	}
	if _, err := client.PodSandboxStatus(short(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: stuck.GetId()}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("status of the hung pod's sandbox: %v, want DeadlineExceeded", err)
	}
	for _, id := range containersOf(stuck.GetId()) {
		if _, err := client.ContainerStatus(short(), &runtimeapi.ContainerStatusRequest{ContainerId: id}); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("status of the hung pod's container: %v, want DeadlineExceeded", err)
		}
	}
	if _, err := client.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: fine.GetId()}); err != nil {
		t.Errorf("status of another pod's sandbox: %v", err)
	}
	for _, id := range containersOf(fine.GetId()) {
		if _, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id}); err != nil {
			t.Errorf("status of another pod's container: %v", err)
		}
	}
}

// A slow pod delays the status of its own containers only, by the delay
// on the simulator's clock.
func TestFaultSlowPod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := startSim(t, Options{Pods: 2, Containers: 1, Clock: clk})
	client := dial(t, s)
	ctx := testContext(t)
	ctrs, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	slow, fast := ctrs.GetContainers()[0], ctrs.GetContainers()[1]
	setFaults(t, s, Faults{SlowPod: map[string]time.Duration{slow.GetLabels()[runtime.PodUIDLabel]: 300 * time.Millisecond}})

	if _, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: fast.GetId()}); err != nil {
		t.Fatalf("status of another pod's container: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: slow.GetId()})
		done <- err
	}()
	eventually(t, "the slow call to wait", clk.HasWaiters)
	select {
	case err := <-done:
		t.Fatalf("the slow pod's status answered before its delay passed: %v", err)
	default:
	}
	clk.Step(300 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("status of the slow pod's container: %v", err)
	}
}

// Event streams end with an error every StreamDropEvery; a new one can be
// opened, and a drop period set at run time applies to open streams.
func TestFaultStreamDrop(t *testing.T) {
	s := startSim(t, Options{Faults: Faults{StreamDropEvery: 100 * time.Millisecond}})
	client := dial(t, s)
	ctx := testContext(t)
	for range 2 {
		stream, err := client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("dropped stream: %v, want Unavailable", err)
		}
	}

	setFaults(t, s, Faults{})
	stream := subscribe(t, s, client, ctx)
	id := runPod(t, client, "a")
	if ev, err := stream.Recv(); err != nil || ev.GetContainerId() != id {
		t.Fatalf("event on a stream without drops: %v, %v", ev, err)
	}
	setFaults(t, s, Faults{StreamDropEvery: time.Millisecond})
	for {
		_, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("stream after the drop fault was set: %v, want Unavailable", err)
			}
			break
		}
	}
}

// GetContainerEvents can answer Unimplemented, as containerd 1.6 does.
func TestFaultEventsUnimplemented(t *testing.T) {
	s := startSim(t, Options{Faults: Faults{EventsUnimplemented: true}})
	client := dial(t, s)
	stream, err := client.GetContainerEvents(testContext(t), &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Recv: %v, want Unimplemented", err)
	}
}

// A restart takes the socket away and brings it back: calls fail with
// Unavailable meanwhile, streams end, queued events are lost, and the pods
// are still there afterwards.
func TestFaultRestart(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := startSim(t, Options{Pods: 5, Containers: 2, Clock: clk})
	client := dial(t, s)
	ctx := testContext(t)
	before, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stream := subscribe(t, s, client, ctx)
	runPod(t, client, "queued")
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}

	restarted := make(chan error, 1)
	go func() { restarted <- s.Restart(30 * time.Second) }()
	eventually(t, "the runtime to go down", func() bool {
		_, err := os.Stat(s.opts.Socket)
		return !s.Stats().Serving && errors.Is(err, os.ErrNotExist) && clk.HasWaiters()
	})
	for {
		_, err := stream.Recv()
		if err == nil {
			continue // the STARTED event of the pod above
		}
		if code := status.Code(err); code != codes.Unavailable {
			t.Fatalf("stream across a restart: %v, want Unavailable", err)
		}
		break
	}
	if err := listErr(ctx, client); status.Code(err) != codes.Unavailable {
		t.Fatalf("ListContainers while down: %v, want Unavailable", err)
	}
	// A change made while down is lost to event subscribers.
	s.st.mu.Lock()
	s.work.newPod(s.st, 0, CauseClient, &eventBuf{})
	s.st.mu.Unlock()

	clk.Step(30 * time.Second)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	var after *runtimeapi.ListContainersResponse
	eventually(t, "the runtime to answer again", func() bool {
		after, err = client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		return err == nil
	})
	if len(after.GetContainers()) != len(before.GetContainers())+2 {
		t.Fatalf("%d containers after the restart, %d before and 2 added", len(after.GetContainers()), len(before.GetContainers()))
	}
	if st := s.Stats(); st.EventsBacklog != 0 || !st.Serving {
		t.Fatalf("after the restart: %+v", st)
	}
	// The new queue starts empty: a new subscriber sees only new events.
	stream = subscribe(t, s, client, ctx)
	id := runPod(t, client, "after")
	if ev, err := stream.Recv(); err != nil || ev.GetContainerId() != id {
		t.Fatalf("first event after the restart: %v, %v; want the new pod's", ev, err)
	}
	if err := s.Restart(0); err != nil {
		t.Fatalf("restart without downtime: %v", err)
	}
}

// Oversized lists pass a 16 MiB receive limit: a client with that limit
// gets ResourceExhausted, one with 64 MiB the same items padded, and the
// streamed lists stay under the limit.
func TestFaultOversizeLists(t *testing.T) {
	s := startSim(t, Options{Pods: 10, Containers: 2})
	ctx := testContext(t)
	limit := func(n int) grpc.DialOption {
		return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n))
	}
	small, large := dial(t, s, limit(16<<20)), dial(t, s, limit(64<<20))
	plain, err := large.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	setFaults(t, s, Faults{OversizeLists: true})

	if _, err := small.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("ListContainers under 16 MiB: %v, want ResourceExhausted", err)
	}
	if _, err := small.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("ListPodSandbox under 16 MiB: %v, want ResourceExhausted", err)
	}
	big, err := large.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatalf("ListContainers under 64 MiB: %v", err)
	}
	if size := proto.Size(big); size < 17<<20 {
		t.Errorf("oversized answer of %d bytes", size)
	}
	if !slices.Equal(containerIDs(big.GetContainers()), containerIDs(plain.GetContainers())) {
		t.Error("the oversized list changed what is listed")
	}
	sbs, err := large.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || proto.Size(sbs) < 17<<20 || len(sbs.GetItems()) != 10 {
		t.Fatalf("ListPodSandbox under 64 MiB: %d items, %d bytes, %v", len(sbs.GetItems()), proto.Size(sbs), err)
	}
	if err := streamErr(ctx, small); err != nil {
		t.Errorf("StreamContainers under 16 MiB: %v", err)
	}

	// Our adapter, at the kubelet's 16 MiB: streaming gets through,
	// unary lists do not.
	for _, disable := range []bool{false, true} {
		rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), MaxRecvMsgSize: 16 << 20, DisableStreaming: disable, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		items, err := rt.ListContainers(ctx, nil)
		rt.Close()
		if disable && status.Code(err) != codes.ResourceExhausted {
			t.Errorf("cri adapter, unary: %v, want ResourceExhausted", err)
		}
		if !disable && (err != nil || len(items) != 20) {
			t.Errorf("cri adapter, streaming: %d items, %v", len(items), err)
		}
	}
}

// Malformed lists have exactly the corruption asked for, in unary and
// streamed lists alike, and statuses are untouched.
func TestFaultMalformed(t *testing.T) {
	s := startSim(t, Options{Pods: 10, Containers: 2})
	client := dial(t, s)
	ctx := testContext(t)
	setFaults(t, s, Faults{Malformed: Malformed{NilMetadata: 2, UnknownState: 1, DuplicateIDs: 3}})

	type counts struct{ items, nilMetadata, unknownState, duplicates int }
	count := func(ids []string, nilMeta func(int) bool, state func(int) int32) counts {
		c := counts{items: len(ids)}
		seen := make(map[string]int)
		for i, id := range ids {
			seen[id]++
			if nilMeta(i) {
				c.nilMetadata++
			}
			if state(i) == UnknownState {
				c.unknownState++
			}
		}
		for _, n := range seen {
			if n > 1 {
				c.duplicates++
			}
		}
		return c
	}
	cs, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	items := cs.GetContainers()
	want := counts{items: 23, nilMetadata: 2, unknownState: 1, duplicates: 3}
	if got := count(containerIDs(items), func(i int) bool { return items[i].GetMetadata() == nil }, func(i int) int32 { return int32(items[i].GetState()) }); got != want {
		t.Errorf("ListContainers: %+v, want %+v", got, want)
	}
	var streamed []*runtimeapi.Container
	stream, err := client.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			break
		}
		streamed = append(streamed, resp.GetContainers()...)
	}
	if got := count(containerIDs(streamed), func(i int) bool { return streamed[i].GetMetadata() == nil }, func(i int) int32 { return int32(streamed[i].GetState()) }); got != want {
		t.Errorf("StreamContainers: %+v, want %+v", got, want)
	}
	sbs, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sbItems := sbs.GetItems()
	want.items = 13
	if got := count(sandboxIDs(sbItems), func(i int) bool { return sbItems[i].GetMetadata() == nil }, func(i int) int32 { return int32(sbItems[i].GetState()) }); got != want {
		t.Errorf("ListPodSandbox: %+v, want %+v", got, want)
	}
	st, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: items[0].GetId()})
	if err != nil || st.GetStatus().GetMetadata() == nil {
		t.Errorf("status of a corrupted list item: %v, %v", st, err)
	}
	setFaults(t, s, Faults{})
	if cs, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil || len(cs.GetContainers()) != 20 || cs.GetContainers()[0].GetMetadata() == nil {
		t.Errorf("after the fault cleared: %d items, %v", len(cs.GetContainers()), err)
	}
}

// Calls are served concurrently: eight status calls wait out their
// latency side by side.
func TestConcurrentCalls(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := startSim(t, Options{Pods: 8, Containers: 1, Clock: clk,
		Latency: LatencyModel{runtime.OpContainerStatus: {P50: time.Hour}}})
	client := dial(t, s)
	ctx := testContext(t)
	cs, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(cs.GetContainers()))
	for _, c := range cs.GetContainers() {
		go func() {
			_, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
			errs <- err
		}()
	}
	eventually(t, "every call to wait at once", func() bool { return clk.Waiters() == 8 })
	clk.Step(time.Hour)
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
