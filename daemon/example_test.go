// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// An embedder runs the daemon over its own runtime: the HTTP API, the
// event journal and the metrics come with it.
func Example() {
	// Any runtime.Runtime will do: cri.New for a CRI socket; this one is
	// in memory.
	rt := fakeruntime.New(fakeruntime.Pod{
		UID: "6f1d", Name: "web", Namespace: "shop",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "sandbox-1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []fakeruntime.Container{{ID: "nginx-1", Name: "nginx", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	})
	d, err := daemon.New(daemon.Config{Runtime: rt, Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	// The cache's global time is set once the first relist is written.
	for d.Cache.GlobalTime().IsZero() {
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get("http://" + d.Addr() + "/v1/pods")
	if err != nil {
		log.Fatal(err)
	}
	var pods api.PodList
	err = json.NewDecoder(resp.Body).Decode(&pods)
	resp.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range pods.Pods {
		fmt.Println(p.Namespace+"/"+p.Name, p.Containers[0].Name, p.Containers[0].State)
	}

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// shop/web nginx running
	// stopped: <nil>
}
