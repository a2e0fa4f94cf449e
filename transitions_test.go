// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// TestTransitionTable drives every cell of the kubelet's transition table
// through a real relist, once for a container and once for a sandbox.
func TestTransitionTable(t *testing.T) {
	const (
		none    = "non-existent"
		run     = "running"
		exit    = "exited"
		unknwn  = "unknown"
		created = "created" // a CRI state the kubelet folds into unknown
	)
	S, D, R := ContainerStarted, ContainerDied, ContainerRemoved
	cells := []struct {
		old, new string
		want     []EventType
	}{
		{none, run, []EventType{S}},
		{none, exit, []EventType{D}},
		{none, unknwn, nil}, // ContainerChanged, never delivered
		{none, none, nil},
		{run, run, nil},
		{run, exit, []EventType{D}},
		{run, unknwn, nil},
		{run, none, []EventType{D, R}},
		{exit, run, []EventType{S}},
		{exit, exit, nil},
		{exit, unknwn, nil},
		{exit, none, []EventType{R}},
		{unknwn, run, []EventType{S}},
		{unknwn, exit, []EventType{D}},
		{unknwn, unknwn, nil},
		{unknwn, none, []EventType{D, R}},
		// created behaves as unknown.
		{none, created, nil},
		{created, run, []EventType{S}},
		{created, exit, []EventType{D}},
		{created, none, []EventType{D, R}},
		{created, unknwn, nil},
	}
	containerStates := map[string]runtimeapi.ContainerState{
		run: runtimeapi.ContainerState_CONTAINER_RUNNING, exit: runtimeapi.ContainerState_CONTAINER_EXITED,
		unknwn: runtimeapi.ContainerState_CONTAINER_UNKNOWN, created: runtimeapi.ContainerState_CONTAINER_CREATED,
	}
	// CRI sandboxes are ready or not ready; any other value is unknown.
	sandboxStates := map[string]runtimeapi.PodSandboxState{
		run: runtimeapi.PodSandboxState_SANDBOX_READY, exit: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		unknwn: runtimeapi.PodSandboxState(5), created: runtimeapi.PodSandboxState(6),
	}
	podWith := func(kind, state string) fakeruntime.Pod {
		p := fakeruntime.Pod{UID: "p", Name: "p", Namespace: "ns"}
		switch {
		case state == none:
		case kind == "container":
			p.Containers = []fakeruntime.Container{{ID: "x", Name: "x", State: containerStates[state]}}
		default:
			p.Sandboxes = []fakeruntime.Sandbox{{ID: "x", State: sandboxStates[state]}}
		}
		return p
	}

	for _, kind := range []string{"container", "sandbox"} {
		for _, c := range cells {
			t.Run(fmt.Sprintf("%s %s to %s", kind, c.old, c.new), func(t *testing.T) {
				e := newEnv(t, fakeruntime.New(podWith(kind, c.old)))
				e.relist()
				e.rt.SetPods(podWith(kind, c.new))
				var want []ev
				for _, typ := range c.want {
					want = append(want, ev{"p", typ, "x"})
				}
				got := e.relist()
				assertEvents(t, got, want...)
				for _, g := range got {
					if g.Sandbox != (kind == "sandbox") {
						t.Errorf("event %+v: Sandbox = %v", g, g.Sandbox)
					}
				}
			})
		}
	}
}
