// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/cri"
)

// benchContainerd returns the newest containerd of the matrix, which the
// benchmarks run against.
func benchContainerd(b *testing.B) *runtimetest.Instance {
	b.Helper()
	var spec *runtimetest.Spec
	for _, s := range matrix(b) {
		if s.Kind == runtimetest.Containerd {
			spec = &s
		}
	}
	if spec == nil {
		b.Skipf("no containerd in the matrix (%s)", runtimetest.ContainerdVersionsEnv)
	}
	in := runtimes.Get(b, *spec)
	b.Logf("against %s", spec)
	return in
}

// BenchmarkContainerd measures relists against the private containerd,
// side by side with the floor they cannot beat: one raw ListPodSandbox and
// one raw ListContainers over the same socket.
//
//	go test -run '^$' -bench Containerd -benchmem ./test/e2e/
//
// pods=N/relist-unchanged is a relist that finds nothing changed;
// pods=50/relist-all-changed inspects every pod, as after a node restart,
// at the kubelet's concurrency of 1 and at our default. pods=50/raw-status
// makes the same PodSandboxStatus and ContainerStatus calls with a bare
// client and nothing else, at 1 and 32 at once: the ratio between those two
// is the most any parallel inspection can gain on this runtime and machine
// (on 2 cores containerd's own CPU bounds it).
func BenchmarkContainerd(b *testing.B) {
	in := benchContainerd(b)
	ctx := b.Context()
	clearPods(b, in)
	b.Cleanup(func() { clearPods(b, in) })

	rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()

	created := 0
	for _, pods := range []int{10, 50} {
		for ; created < pods; created++ {
			addBenchPod(b, in, created)
		}
		b.Run(fmt.Sprintf("pods=%d/floor", pods), func(b *testing.B) {
			for b.Loop() {
				if _, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
					b.Fatal(err)
				}
				if _, err := in.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/relist-unchanged", pods), func(b *testing.B) {
			g := newBenchGenerator(b, rt, pleg.DefaultInspectConcurrency)
			if err := g.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	calls := statusCalls(b, in)
	for _, concurrency := range []int{1, 32} {
		b.Run(fmt.Sprintf("pods=50/raw-status/concurrency=%d", concurrency), func(b *testing.B) {
			for b.Loop() {
				rawStatus(b, calls, concurrency)
			}
		})
	}
	for _, concurrency := range []int{1, 2, 4, 8, 16, 32} {
		b.Run(fmt.Sprintf("pods=50/relist-all-changed/concurrency=%d", concurrency), func(b *testing.B) {
			for range b.N {
				// A generator that has seen nothing finds every container new.
				b.StopTimer()
				g := newBenchGenerator(b, rt, concurrency)
				b.StartTimer()
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// statusCalls returns, for every sandbox and container on the runtime, the
// status call an inspection makes for it.
func statusCalls(b *testing.B, in *runtimetest.Instance) []func(context.Context) error {
	b.Helper()
	ctx := b.Context()
	sandboxes, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	containers, err := in.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		b.Fatal(err)
	}
	// In the order an inspection makes them: a pod's sandbox, then its
	// containers.
	var calls []func(context.Context) error
	for _, sb := range sandboxes.Items {
		calls = append(calls, func(ctx context.Context) error {
			_, err := in.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
			return err
		})
		for _, c := range containers.Containers {
			if c.PodSandboxId != sb.Id {
				continue
			}
			calls = append(calls, func(ctx context.Context) error {
				_, err := in.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
				return err
			})
		}
	}
	if want := len(sandboxes.Items) + len(containers.Containers); len(calls) != want {
		b.Fatalf("%d status calls for %d sandboxes and containers", len(calls), want)
	}
	return calls
}

// rawStatus makes every call with the given number of workers and nothing
// else: the ceiling of what inspecting in parallel can gain on this runtime
// and machine, whoever the client.
func rawStatus(b *testing.B, calls []func(context.Context) error, workers int) {
	work := make(chan func(context.Context) error)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for call := range work {
				if err := call(b.Context()); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, call := range calls {
		work <- call
	}
	close(work)
	wg.Wait()
}

func newBenchGenerator(b *testing.B, rt *cri.Runtime, concurrency int) *pleg.Generator {
	g, err := pleg.New(rt, pleg.Options{
		InspectConcurrency: concurrency,
		Cache:              podcache.New(),
		Logger:             slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// addBenchPod runs pod i with two sleeping containers.
func addBenchPod(b *testing.B, in *runtimetest.Instance, i int) {
	b.Helper()
	ctx := context.Background()
	pod := runtimetest.PodSpec{UID: fmt.Sprintf("bench-%03d", i), Name: fmt.Sprintf("bench-%03d", i), Namespace: "bench"}
	sb, err := in.RunPod(ctx, pod)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"app", "sidecar"} {
		if _, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: name, Args: sleeping}); err != nil {
			b.Fatal(err)
		}
	}
}

// clearPods stops and removes every pod, so that a benchmark lists only
// its own.
func clearPods(b *testing.B, in *runtimetest.Instance) {
	b.Helper()
	ctx := context.Background()
	resp, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	for _, sb := range resp.Items {
		if err := in.StopPod(ctx, sb.Id); err != nil {
			b.Fatal(err)
		}
		if err := in.RemovePod(ctx, sb.Id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventLatency measures, on containerd, how long after a
// container starts (StartContainer returned) and after it exits the
// generator delivers ContainerStarted and ContainerDied: relisting every
// second, against the event stream. An exit is timed twice: from the
// container's FinishedAt, and from the created_at of the STOPPED event
// containerd sends (read on a stream of its own), which containerd sends
// some 20 ms after FinishedAt, a delay of its own no client can take off.
// Each iteration is one container that runs for 1.5 s.
//
//	go test -run '^$' -bench EventLatency -benchtime 40x ./test/e2e/
func BenchmarkEventLatency(b *testing.B) {
	in := benchContainerd(b)
	rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	var stoppedMu sync.Mutex
	stoppedAt := map[string]time.Time{}
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	stream, err := in.Runtime.GetContainerEvents(streamCtx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			if ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				stoppedMu.Lock()
				stoppedAt[ev.ContainerId] = time.Unix(0, ev.CreatedAt)
				stoppedMu.Unlock()
			}
		}
	}()
	for _, mode := range []pleg.Mode{pleg.ModeGeneric, pleg.ModeEvented} {
		b.Run(string(mode), func(b *testing.B) {
			g, err := pleg.New(rt, pleg.Options{Mode: mode, RelistPeriod: time.Second, Cache: podcache.New(), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			sub := g.Subscribe()
			defer sub.Close()
			type key struct {
				id  string
				typ pleg.EventType
			}
			var mu sync.Mutex
			arrived := map[key]time.Time{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for {
					ev, err := sub.Next(ctx)
					if err != nil {
						return
					}
					now := time.Now()
					mu.Lock()
					arrived[key{ev.ContainerID, ev.Type}] = now
					mu.Unlock()
				}
			}()
			g.Start()
			defer g.Stop()
			deadline := time.Now().Add(time.Minute)
			for mode == pleg.ModeEvented && !g.Status().Evented {
				if time.Now().After(deadline) {
					b.Fatal("the event stream never drove")
				}
				time.Sleep(50 * time.Millisecond)
			}
			arrival := func(id string, typ pleg.EventType) time.Time {
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					mu.Lock()
					at, ok := arrived[key{id, typ}]
					mu.Unlock()
					if ok {
						return at
					}
				}
				b.Fatalf("no %s for %s", typ, id)
				return time.Time{}
			}

			bctx := context.Background()
			pod := runtimetest.PodSpec{UID: "latency-" + string(mode), Name: "latency-" + string(mode), Namespace: "bench"}
			sb, err := in.RunPod(bctx, pod)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = in.StopPod(bctx, sb); _ = in.RemovePod(bctx, sb) }()
			var starts, exits, afterEvent []time.Duration
			for i := range b.N {
				id, err := in.CreateContainer(bctx, sb, pod, runtimetest.ContainerSpec{Name: fmt.Sprint("c", i), Args: []string{"exit", "0", "1500ms"}})
				if err != nil {
					b.Fatal(err)
				}
				if err := in.StartContainer(bctx, id); err != nil {
					b.Fatal(err)
				}
				started := time.Now()
				starts = append(starts, arrival(id, pleg.ContainerStarted).Sub(started))
				died := arrival(id, pleg.ContainerDied)
				st, err := in.Runtime.ContainerStatus(bctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
				if err != nil {
					b.Fatal(err)
				}
				exits = append(exits, died.Sub(time.Unix(0, st.GetStatus().GetFinishedAt())))
				stoppedMu.Lock()
				sent, ok := stoppedAt[id]
				stoppedMu.Unlock()
				if ok {
					afterEvent = append(afterEvent, died.Sub(sent))
				}
				if err := in.RemoveContainer(bctx, id); err != nil {
					b.Fatal(err)
				}
			}
			for name, d := range map[string][]time.Duration{"start": starts, "exit": exits, "exit-after-stopped-event": afterEvent} {
				if len(d) == 0 {
					continue
				}
				slices.Sort(d)
				b.ReportMetric(ms(d[len(d)/2]), name+"-p50-ms")
				b.ReportMetric(ms(d[(len(d)*99-1)/100]), name+"-p99-ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
