// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg_test

import (
	"context"
	"fmt"
	"log"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func Example() {
	// Any CRI runtime client will do; this one is in memory.
	rt := fakeruntime.New(fakeruntime.Pod{
		UID: "6f1d", Name: "web", Namespace: "shop",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "sandbox-1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []fakeruntime.Container{{ID: "nginx-1", Name: "nginx", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	})

	cache := podcache.New()
	gen, err := pleg.New(rt, pleg.Options{Cache: cache})
	if err != nil {
		log.Fatal(err)
	}
	events := gen.Subscribe()
	defer events.Close()
	gen.Start()
	defer gen.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		ev, err := events.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		// The cache holds the pod's fresh status before its events arrive.
		status, _ := cache.Get(ev.PodUID)
		fmt.Println(ev.Type, ev.PodNamespace+"/"+ev.PodName, ev.ContainerID, len(status.Containers), "container(s)")
	}
	healthy, _ := gen.Healthy()
	fmt.Println("healthy:", healthy)
	// Output:
	// ContainerStarted shop/web nginx-1 1 container(s)
	// ContainerStarted shop/web sandbox-1 1 container(s)
	// healthy: true
}
