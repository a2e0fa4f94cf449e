// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package syncloop_test

import (
	"context"
	"fmt"
	"log"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime/fakeruntime"
	"github.com/plegkit/pleg/syncloop"
)

// A loop fed by a generator's subscription and gated on the generator's
// health, as the kubelet gates its syncLoop on "PLEG".
func Example() {
	rt := fakeruntime.New(fakeruntime.Pod{
		UID: "pod-1", Name: "web", Namespace: "default",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "sb-1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []fakeruntime.Container{{ID: "c-1", Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	})
	gen, err := pleg.New(rt, pleg.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// Subscribe before Start so the first relist's events are not missed.
	sub := gen.Subscribe()
	gen.Start()
	defer gen.Stop()

	loop, err := syncloop.New(sub, syncloop.Options{
		SyncPod: func(ctx context.Context, podUID string) {
			fmt.Println("sync", podUID)
		},
		ContainerDied: func(ctx context.Context, ev pleg.Event) {
			fmt.Println("clean up after", ev.ContainerID)
		},
		HealthChecks: []pleg.HealthCheck{gen.HealthCheck()},
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := loop.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
