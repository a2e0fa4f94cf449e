// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// The metrics the generator sets from its state, rather than counts as
// things happen.

// updateMode sets pleg_mode to 1 for the mode in force, 0 for the other.
func (g *Generator) updateMode() {
	inForce := ModeGeneric
	if g.evented() {
		inForce = ModeEvented
	}
	for _, m := range []Mode{ModeGeneric, ModeEvented} {
		v := 0.0
		if m == inForce {
			v = 1
		}
		g.metrics.Mode.WithLabelValues(string(m)).Set(v)
	}
}

// updateRunningMetrics sets kubelet_running_pods (pods with a ready
// sandbox) and kubelet_running_containers (containers by CRI state).
func (g *Generator) updateRunningMetrics() {
	running := 0
	var counts [4]int
	for _, rec := range g.st.seen {
		if rec.runningSandbox {
			running++
		}
		for _, e := range rec.cur {
			if e.c == nil {
				continue
			}
			switch s := e.c.State; s {
			case runtimeapi.ContainerState_CONTAINER_CREATED,
				runtimeapi.ContainerState_CONTAINER_RUNNING,
				runtimeapi.ContainerState_CONTAINER_EXITED:
				counts[s]++
			default:
				counts[runtimeapi.ContainerState_CONTAINER_UNKNOWN]++
			}
		}
	}
	g.metrics.RunningPods.Set(float64(running))
	g.metrics.SetRunningContainers(counts[0], counts[1], counts[2], counts[3])
}
