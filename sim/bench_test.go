// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

// Run the benchmarks with
//
//	go test -run '^$' -bench . -benchmem ./sim/
//
// BenchmarkSeedNodeChangedPods relists 1,000 pods one by one at
// concurrency 1, which takes about 45 s an iteration: give it
// -benchtime 1x.

// newBenchRuntime starts a simulator and our CRI adapter over it.
func newBenchRuntime(b *testing.B, opts Options, criOpts cri.Options) (*Sim, *cri.Runtime) {
	b.Helper()
	s := startSim(b, opts)
	criOpts.Endpoint = s.Endpoint()
	criOpts.Logger = quietLogger()
	rt, err := cri.New(criOpts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	return s, rt
}

// BenchmarkListContainers30k lists 30,000 containers (10,000 pods × 3)
// through gRPC with the zero latency preset: the whole call, decoding
// included, by our adapter (streamed, its default, and unary), and the
// unary call with a client that counts the bytes instead of decoding them
// (wire: what serving the list costs). Goal: under 100 ms.
func BenchmarkListContainers30k(b *testing.B) {
	b.Run("wire", func(b *testing.B) {
		s := startSim(b, Options{Pods: 10_000, Containers: 3})
		conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.ForceCodecV2(countingCodec{encoding.GetCodecV2(protocodec.Name)})))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		var size int
		for b.Loop() {
			if err := conn.Invoke(context.Background(), runtimeapi.RuntimeService_ListContainers_FullMethodName, &runtimeapi.ListContainersRequest{}, &size); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size)/(1<<20), "MiB/list")
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/list")
	})
	for _, mode := range []struct {
		name     string
		disabled bool
	}{{"stream", false}, {"unary", true}} {
		b.Run(mode.name, func(b *testing.B) {
			_, rt := newBenchRuntime(b, Options{Pods: 10_000, Containers: 3}, cri.Options{DisableStreaming: mode.disabled})
			ctx := context.Background()
			var n int
			for b.Loop() {
				items, err := rt.ListContainers(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				n = len(items)
			}
			if n != 30_000 {
				b.Fatalf("listed %d containers", n)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/list")
		})
	}
}

// countingCodec receives a message by counting its bytes.
type countingCodec struct{ encoding.CodecV2 }

func (countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*int) = data.Len()
	return nil
}

// timedRuntime measures the time spent in the runtime's list calls, so
// that a relist's time splits into the lists and the generator's own work.
type timedRuntime struct {
	runtime.Runtime
	sandboxNanos, containerNanos atomic.Int64
}

func (t *timedRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	start := time.Now()
	defer func() { t.sandboxNanos.Add(int64(time.Since(start))) }()
	return t.Runtime.ListPodSandbox(ctx, f)
}

func (t *timedRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	start := time.Now()
	defer func() { t.containerNanos.Add(int64(time.Since(start))) }()
	return t.Runtime.ListContainers(ctx, f)
}

// BenchmarkRelist10kNoChange relists 10,000 pods × 3 containers that did
// not change, over our CRI adapter over the simulator (zero preset),
// after a warm-up relist. Goal: under 150 ms, with the generator's own
// work a small share: list-sandboxes-ms and list-containers-ms are the
// time in the two list calls (gRPC and decoding included), generator-ms
// the rest.
func BenchmarkRelist10kNoChange(b *testing.B) {
	_, rt := newBenchRuntime(b, Options{Pods: 10_000, Containers: 3}, cri.Options{})
	timed := &timedRuntime{Runtime: rt}
	g, err := pleg.New(timed, pleg.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Relist(ctx); err != nil { // every pod new: inspected once
		b.Fatal(err)
	}
	timed.sandboxNanos.Store(0)
	timed.containerNanos.Store(0)
	for b.Loop() {
		if err := g.Relist(ctx); err != nil {
			b.Fatal(err)
		}
	}
	total := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	sandboxes := float64(timed.sandboxNanos.Load()) / float64(b.N)
	containers := float64(timed.containerNanos.Load()) / float64(b.N)
	list := sandboxes + containers
	b.ReportMetric(sandboxes/1e6, "list-sandboxes-ms/op")
	b.ReportMetric(containers/1e6, "list-containers-ms/op")
	b.ReportMetric((total-list)/1e6, "generator-ms/op")
	b.ReportMetric(100*(total-list)/total, "generator-%")
}

// BenchmarkSeedNodeChangedPods relists 1,000 pods × 3 containers, every
// one of them new to a fresh generator (so each pod is inspected: one
// sandbox and three container status calls), with the latencies measured
// on the seed article's node, at the kubelet's concurrency of 1 and at
// higher ones. The kubelet's serial way takes about a minute; goal: at
// least 30× faster. speedup is relative to concurrency 1 in the same run.
func BenchmarkSeedNodeChangedPods(b *testing.B) {
	latency, err := LatencyPreset(LatencySeedNode)
	if err != nil {
		b.Fatal(err)
	}
	_, rt := newBenchRuntime(b, Options{Pods: 1000, Containers: 3, Latency: latency, Seed: 1}, cri.Options{})
	var serial float64
	for _, concurrency := range []int{1, pleg.DefaultInspectConcurrency, 16, 32, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				g, err := pleg.New(rt, pleg.Options{InspectConcurrency: concurrency, Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if concurrency == 1 {
				serial = perOp
			}
			if serial > 0 {
				b.ReportMetric(serial/perOp, "speedup")
			}
			b.ReportMetric(perOp/1e9, "s/relist")
		})
	}
}

// BenchmarkColdRelist50 relists 50 pods × 3 containers that a fresh
// generator has never seen, so every pod is inspected, with the seed
// node's latencies: with sandbox status answers that carry their
// containers' statuses and a timestamp (as CRI-O's do with pod events on),
// one call a pod, and without (as containerd's), four; at the kubelet's
// concurrency of 1 and at the default. speedup is without over with, in
// the same run.
//
//	go test -run '^$' -bench ColdRelist50 -benchmem ./sim/
func BenchmarkColdRelist50(b *testing.B) {
	latency, err := LatencyPreset(LatencySeedNode)
	if err != nil {
		b.Fatal(err)
	}
	for _, concurrency := range []int{1, pleg.DefaultInspectConcurrency} {
		var without float64
		for _, carry := range []bool{false, true} {
			b.Run(fmt.Sprintf("concurrency=%d/sandbox-statuses=%v", concurrency, carry), func(b *testing.B) {
				_, rt := newBenchRuntime(b, Options{Pods: 50, Containers: 3, Latency: latency, Seed: 1, SandboxContainerStatuses: carry}, cri.Options{})
				ctx := context.Background()
				for b.Loop() {
					b.StopTimer()
					g, err := pleg.New(rt, pleg.Options{InspectConcurrency: concurrency, Mode: pleg.ModeGeneric, Logger: quietLogger()})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := g.Relist(ctx); err != nil {
						b.Fatal(err)
					}
				}
				perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if !carry {
					without = perOp
				} else if without > 0 {
					b.ReportMetric(without/perOp, "speedup")
				}
				b.ReportMetric(perOp/1e6, "ms/relist")
			})
		}
	}
}
