// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

// BenchmarkUntoldRemovals measures what finding removals the event stream
// does not tell costs on an idle node of 100 pods × 2 containers whose
// runtime, like CRI-O, sends no event when a pod is removed: the CRI calls
// a second beyond the event stream, for a generator driven by the stream
// (evented: the removal watch lists the exited sandboxes every second
// while there are some), and for one relisting every second (generic:
// what evented mode fell back to before the watch, once it had found
// removals untold). Nodes whose pods all run (stopped=0), and where 10 of
// them are stopped and not removed yet (stopped=10). Then those 10 pods
// are removed, one every 300 ms, and removal-ms is how long after
// RemovePodSandbox returned the ContainerRemoved of each sandbox came
// (p50 and max).
//
//	go test -run '^$' -bench UntoldRemovals -benchtime 1x ./sim/
//
// PLEG_BENCH_IDLE_WINDOW sets how long the calls are counted (10s).
func BenchmarkUntoldRemovals(b *testing.B) {
	window := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PLEG_BENCH_IDLE_WINDOW")); err == nil {
		window = d
	}
	for _, mode := range []pleg.Mode{pleg.ModeEvented, pleg.ModeGeneric} {
		for _, stopped := range []int{0, 10} {
			b.Run(fmt.Sprintf("mode=%s/stopped=%d", mode, stopped), func(b *testing.B) {
				for b.Loop() {
					untoldRemovals(b, mode, stopped, window)
				}
			})
		}
	}
}

// idleNode is a simulated CRI-O node of 100 idle pods under a generator.
type idleNode struct {
	sim    *Sim
	client runtimeapi.RuntimeServiceClient
	gen    *pleg.Generator

	mu      sync.Mutex
	removed map[string]time.Time // sandbox ID: when its ContainerRemoved came
}

func untoldRemovals(b *testing.B, mode pleg.Mode, stopped int, window time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	n := startIdleNode(b, mode)
	ctx := testContext(b)
	sandboxes, err := n.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	victims := sandboxes.Items[:stopped]
	for _, sb := range victims {
		if _, err := n.client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // the stops are reported, the watch knows them

	before := n.sim.Stats().Calls
	time.Sleep(window)
	after := n.sim.Stats().Calls
	for _, op := range []string{runtime.OpListPodSandbox, runtime.OpListContainers, runtime.OpPodSandboxStatus, runtime.OpContainerStatus} {
		b.ReportMetric(float64(after[op]-before[op])/window.Seconds(), op+"/s")
	}

	var took []time.Duration
	for _, sb := range victims {
		if _, err := n.client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			b.Fatal(err)
		}
		done := time.Now()
		eventually(b, "the sandbox's ContainerRemoved", func() bool { _, ok := n.removedAt(sb.Id); return ok })
		at, _ := n.removedAt(sb.Id)
		took = append(took, at.Sub(done))
		time.Sleep(300 * time.Millisecond)
	}
	if len(took) > 0 {
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "removal-p50-ms")
		b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "removal-max-ms")
	}
	if untold := n.gen.Status().UntoldRemovals; mode == pleg.ModeEvented {
		b.Logf("evented: removals untold %s", strings.Join(untold, ", "))
	}
}

// startIdleNode starts the simulated node and its generator, and waits
// until the generator relists at the pace of its mode.
func startIdleNode(b *testing.B, mode pleg.Mode) *idleNode {
	b.Helper()
	s, rt := newBenchRuntime(b, Options{Pods: 100, Containers: 2, Events: EventsCRIO, Seed: 11}, cri.Options{})
	g, err := pleg.New(rt, pleg.Options{Mode: mode, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	n := &idleNode{sim: s, client: dial(b, s), gen: g, removed: map[string]time.Time{}}
	sub := g.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if ev.Type == pleg.ContainerRemoved && ev.Sandbox {
				n.mu.Lock()
				n.removed[ev.ContainerID] = time.Now()
				n.mu.Unlock()
			}
		}
	})
	g.Start()
	b.Cleanup(func() {
		g.Stop()
		cancel()
		wg.Wait()
		sub.Close()
	})
	if mode == pleg.ModeEvented {
		eventually(b, "the stream to drive", func() bool { return g.Status().Evented })
	}
	n.tellContainerRemovals(b)
	return n
}

// tellContainerRemovals removes a container, as a node with any churn
// does: the stream tells it, and the generator learns that such removals
// are told (the simulator is no runtime known by name).
func (n *idleNode) tellContainerRemovals(b *testing.B) {
	ctx := testContext(b)
	sandboxes, err := n.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	sb := sandboxes.Items[len(sandboxes.Items)-1]
	md := sb.GetMetadata()
	c, err := n.client.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.Id,
		Config: containerConfigFor(md.Name, md.Uid, "once", 0)})
	if err != nil {
		b.Fatal(err)
	}
	for _, call := range []func() error{
		func() error {
			_, err := n.client.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
			return err
		},
		func() error {
			_, err := n.client.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId})
			return err
		},
		func() error {
			_, err := n.client.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId})
			return err
		},
	} {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(time.Second)
}

func (n *idleNode) removedAt(id string) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.removed[id]
	return at, ok
}
