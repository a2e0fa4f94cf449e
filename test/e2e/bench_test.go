package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/test/containerdtest"
)

// BenchmarkContainerd measures relists against the private containerd,
// side by side with the floor they cannot beat: one raw ListPodSandbox and
// one raw ListContainers over the same socket.
//
//	go test -run '^$' -bench Containerd -benchmem ./test/e2e/
//
// pods=N/relist-unchanged is a relist that finds nothing changed;
// pods=50/relist-all-changed inspects every pod, as after a node restart,
// at the kubelet's concurrency of 1 and at our default.
func BenchmarkContainerd(b *testing.B) {
	in := containerd(b)
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
func addBenchPod(b *testing.B, in *containerdtest.Instance, i int) {
	b.Helper()
	ctx := context.Background()
	pod := containerdtest.PodSpec{UID: fmt.Sprintf("bench-%03d", i), Name: fmt.Sprintf("bench-%03d", i), Namespace: "bench"}
	sb, err := in.RunPod(ctx, pod)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"app", "sidecar"} {
		if _, err := in.RunContainer(ctx, sb, pod, containerdtest.ContainerSpec{Name: name, Args: sleeping}); err != nil {
			b.Fatal(err)
		}
	}
}

// clearPods stops and removes every pod, so that a benchmark lists only
// its own.
func clearPods(b *testing.B, in *containerdtest.Instance) {
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
