// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"log/slog"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime/cri"
)

// BenchmarkRelistCeiling sets pleg's relists beside what the runtime
// allows, turn about in each op, on containerd with 50 pods × 2
// containers:
//
//   - cold: a relist by a generator that has seen nothing (every pod
//     changed, as after a node restart: its lists, then every pod
//     inspected at the default InspectConcurrency), against ceiling: the
//     same PodSandboxStatus and ContainerStatus calls by a bare client at
//     the same concurrency, nothing else. ceiling/cold is the fraction of
//     the runtime's ceiling pleg reaches (1 is the ceiling; the cold relist
//     also lists, which the ceiling does not);
//
//   - idle: a relist that finds nothing changed, against floor: one raw
//     ListPodSandbox and one raw ListContainers. idle/floor is what pleg
//     adds to the two lists it cannot do without.
//
//     go test -run '^$' -bench RelistCeiling -benchtime 30x ./test/e2e/
func BenchmarkRelistCeiling(b *testing.B) {
	in := benchContainerd(b)
	ctx := b.Context()
	clearPods(b, in)
	b.Cleanup(func() { clearPods(b, in) })
	rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	for i := range 50 {
		addBenchPod(b, in, i)
	}
	calls := statusCalls(b, in)
	idle := newBenchGenerator(b, rt, pleg.DefaultInspectConcurrency)
	if err := idle.Relist(ctx); err != nil {
		b.Fatal(err)
	}
	var cold, ceiling, idleT, floor time.Duration
	timed := func(total *time.Duration, f func()) {
		start := time.Now()
		f()
		*total += time.Since(start)
	}
	steps := []func(){
		func() {
			b.StopTimer()
			g := newBenchGenerator(b, rt, pleg.DefaultInspectConcurrency)
			b.StartTimer()
			timed(&cold, func() {
				if err := g.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			})
		},
		func() { timed(&ceiling, func() { rawStatus(b, calls, pleg.DefaultInspectConcurrency) }) },
		func() {
			timed(&idleT, func() {
				if err := idle.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			})
		},
		func() {
			timed(&floor, func() {
				if _, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil {
					b.Fatal(err)
				}
				if _, err := in.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil {
					b.Fatal(err)
				}
			})
		},
	}
	n := 0
	for b.Loop() {
		// Turn about, so that no step always follows the same one.
		for j := range steps {
			steps[(n+j)%len(steps)]()
		}
		n++
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(n) }
	b.ReportMetric(per(cold), "cold-ms")
	b.ReportMetric(per(ceiling), "ceiling-ms")
	b.ReportMetric(float64(ceiling)/float64(cold), "ceiling/cold")
	b.ReportMetric(per(idleT), "idle-ms")
	b.ReportMetric(per(floor), "floor-ms")
	b.ReportMetric(float64(idleT)/float64(floor), "idle/floor")
}
