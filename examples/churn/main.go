// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command churn runs the generator over an in-memory runtime whose
// containers keep exiting and restarting, and prints the events it
// delivers: the library at work, without a container runtime.
//
//	go run ./examples/churn -duration 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func main() {
	pods := flag.Int("pods", 20, "pods in the runtime, 3 containers each")
	duration := flag.Duration("duration", 10*time.Second, "how long to run")
	period := flag.Duration("relist-period", time.Second, "pause between relists")
	every := flag.Duration("churn", 200*time.Millisecond, "one container exits or restarts this often")
	seed := flag.Uint64("seed", 1, "seed of the churn")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()

	rt, churn := newChurningRuntime(*pods, *seed)
	cache := podcache.New()
	gen, err := pleg.New(rt, pleg.Options{
		RelistPeriod: *period,
		Cache:        cache,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		log.Fatal(err)
	}
	events := gen.Subscribe()
	defer events.Close()
	gen.Start()
	defer gen.Stop()

	go func() {
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				churn()
			}
		}
	}()

	counts := map[pleg.EventType]int{}
	for {
		ev, err := events.Next(ctx)
		if err != nil {
			break
		}
		counts[ev.Type]++
		what := ev.ContainerName
		if ev.Sandbox {
			what = "(sandbox)"
		}
		detail := ""
		if status, _ := cache.Get(ev.PodUID); ev.Type == pleg.ContainerDied {
			if c := status.FindContainerByID(ev.ContainerID); c != nil {
				detail = fmt.Sprintf("exit code %d (%s)", c.GetExitCode(), c.GetReason())
			}
		}
		fmt.Printf("%s  %-16s  %s/%s  %s %s  %s\n", ev.Observed.Format("15:04:05.000"), ev.Type,
			ev.PodNamespace, ev.PodName, what, ev.ContainerID, detail)
	}

	healthy, herr := gen.Healthy()
	fmt.Printf("\n%d pods cached; events: %d started, %d died, %d removed; healthy: %v",
		cache.Len(), counts[pleg.ContainerStarted], counts[pleg.ContainerDied], counts[pleg.ContainerRemoved], healthy)
	if herr != nil {
		fmt.Printf(" (%v)", herr)
	}
	fmt.Println()
}

// newChurningRuntime returns a runtime of n running pods and a function that
// makes one container exit, or restarts an exited one as a new attempt.
func newChurningRuntime(n int, seed uint64) (*fakeruntime.Runtime, func()) {
	rng := rand.New(rand.NewPCG(seed, seed))
	var specs []fakeruntime.Pod
	for i := range n {
		p := fakeruntime.Pod{
			UID:       fmt.Sprintf("%08x-pod", i),
			Name:      fmt.Sprintf("web-%d", i),
			Namespace: "shop",
			IPs:       []string{fmt.Sprintf("10.244.0.%d", i+2)},
			Sandboxes: []fakeruntime.Sandbox{
				{ID: fmt.Sprintf("sandbox-%03d", i), State: runtimeapi.PodSandboxState_SANDBOX_READY},
			},
		}
		for _, name := range []string{"app", "sidecar", "metrics"} {
			p.Containers = append(p.Containers, fakeruntime.Container{
				ID: fmt.Sprintf("%s-%03d-0", name, i), Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
			})
		}
		specs = append(specs, p)
	}
	rt := fakeruntime.New(specs...)
	exitedAt := map[string]bool{}
	attempts := map[string]int{}
	return rt, func() {
		i := rng.IntN(len(specs))
		p := specs[i]
		c := &p.Containers[rng.IntN(len(p.Containers))]
		if !exitedAt[c.ID] {
			_ = rt.SetContainerState(c.ID, runtimeapi.ContainerState_CONTAINER_EXITED, int32(rng.IntN(2)*137))
			exitedAt[c.ID] = true
			return
		}
		key := fmt.Sprintf("%s/%s", p.UID, c.Name)
		attempts[key]++
		next := fakeruntime.Container{ID: fmt.Sprintf("%s-%03d-%d", c.Name, i, attempts[key]), Name: c.Name,
			State: runtimeapi.ContainerState_CONTAINER_RUNNING, Attempt: uint32(attempts[key])}
		if err := rt.ReplaceContainer(c.ID, next); err == nil {
			delete(exitedAt, c.ID)
			*c = next
		}
	}
}
