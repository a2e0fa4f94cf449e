// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// benchPods returns n pods of one sandbox and containers containers each.
// The containers of the first changed pods are exited, the others running.
func benchPods(n, containers, changed int) []fakeruntime.Pod {
	pods := make([]fakeruntime.Pod, n)
	for i := range pods {
		p := fakeruntime.Pod{
			UID: fmt.Sprintf("uid-%06d", i), Name: fmt.Sprintf("pod-%06d", i), Namespace: "bench",
			IPs:       []string{"10.1.2.3"},
			Sandboxes: []fakeruntime.Sandbox{{ID: fmt.Sprintf("sb-%06d", i), State: ready}},
		}
		for j := range containers {
			state := running
			if i < changed {
				state = exited
			}
			p.Containers = append(p.Containers, fakeruntime.Container{ID: fmt.Sprintf("c-%06d-%d", i, j), Name: fmt.Sprintf("c%d", j), State: state})
		}
		pods[i] = p
	}
	return pods
}

func newBenchGenerator(b *testing.B, rt *fakeruntime.Runtime, concurrency int) *Generator {
	b.Helper()
	g, err := New(rt, Options{
		InspectConcurrency: concurrency,
		Cache:              podcache.New(),
		Logger:             slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkRelist measures one global relist of pods x 3 containers on the
// in-memory runtime, with a share of the pods changing between relists.
// The runtime alternates between two prepared states, so every relist sees
// the same number of changed pods.
func BenchmarkRelist(b *testing.B) {
	for _, pods := range []int{100, 1_000, 10_000} {
		for _, pct := range []int{0, 10, 100} {
			b.Run(fmt.Sprintf("pods=%d/changed=%d%%", pods, pct), func(b *testing.B) {
				changed := pods * pct / 100
				states := []*fakeruntime.Snapshot{
					fakeruntime.NewSnapshot(benchPods(pods, 3, 0)...),
					fakeruntime.NewSnapshot(benchPods(pods, 3, changed)...),
				}
				rt := fakeruntime.New()
				rt.Load(states[0])
				g := newBenchGenerator(b, rt, DefaultInspectConcurrency)
				ctx := b.Context()
				// Settle: every pod seen, and seen in both states.
				for _, s := range states {
					rt.Load(s)
					if err := g.Relist(ctx); err != nil {
						b.Fatal(err)
					}
				}
				i := 0
				for b.Loop() {
					if changed > 0 {
						rt.Load(states[i%2])
						i++
					}
					if err := g.Relist(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(pods*4), "items/relist")
			})
		}
	}
}

// BenchmarkInspectConcurrency measures a relist of 1,000 changed pods whose
// inspection takes 5 ms each (the runtime's sandbox status call), at the
// kubelet's concurrency of 1 and at higher ones.
func BenchmarkInspectConcurrency(b *testing.B) {
	const pods = 1000
	for _, concurrency := range []int{1, 4, 8, 16, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			states := []*fakeruntime.Snapshot{
				fakeruntime.NewSnapshot(benchPods(pods, 1, 0)...),
				fakeruntime.NewSnapshot(benchPods(pods, 1, pods)...),
			}
			rt := fakeruntime.New()
			rt.Load(states[0])
			g := newBenchGenerator(b, rt, concurrency)
			ctx := b.Context()
			if err := g.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			rt.SetLatency(runtime.OpPodSandboxStatus, 5*time.Millisecond)
			i := 1
			for b.Loop() {
				rt.Load(states[i%2])
				i++
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
