// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"

	"github.com/plegkit/pleg/runtime"
)

func (a *assessment) unreachable() {
	a.add(Finding{
		ID:       "runtime-unreachable",
		Severity: Critical,
		Title:    "The container runtime does not answer",
		Evidence: []string{
			"endpoint " + a.r.Endpoint,
			a.r.Runtime.Error,
			"the kubelet's relist fails the same way: PLEG turns unhealthy once the last good relist is older than " +
				a.threshold().String(),
		},
		Action: "Check that the runtime runs and listens there: " + a.rt.systemctl() + "; " + a.rt.journal +
			" --since -30m; crictl --runtime-endpoint " + a.r.Endpoint + " version. " +
			"Compare the endpoint with the kubelet's --container-runtime-endpoint. " +
			"A runtime that accepts the connection but never answers is hung: take its goroutine stacks (" +
			a.rt.stacks(0) + ") before restarting it.",
	})
}

func (a *assessment) runtimeConditions() {
	rt := a.r.Runtime
	if rt.Error != "" {
		a.add(Finding{
			ID: "runtime-status-failed", Severity: Warning, Operation: runtime.OpStatus,
			Title:    "The runtime answers Version but not Status",
			Evidence: []string{rt.Error},
			Action:   "The kubelet reads Status for the node's readiness; look at the runtime's logs for the failure.",
		})
	}
	for _, c := range rt.Conditions {
		if c.Status {
			continue
		}
		ev := []string{fmt.Sprintf("%s=false reason=%q message=%q", c.Type, c.Reason, c.Message)}
		switch c.Type {
		case "RuntimeReady":
			a.add(Finding{
				ID: "runtime-not-ready", Severity: Critical, Title: "The runtime reports itself not ready",
				Evidence: ev,
				Action:   "The kubelet marks the node NotReady; read the runtime's logs for why (" + a.rt.journal + ").",
			})
		case "NetworkReady":
			a.add(Finding{
				ID: "network-not-ready", Severity: Critical, Title: "The runtime reports the pod network not ready",
				Evidence: append(ev, "the node is NotReady for this, not for PLEG"),
				Action: "Check the CNI plugin: its pods on this node, its configuration in /etc/cni/net.d, its binaries in " +
					"/opt/cni/bin.",
			})
		}
	}
}

func (a *assessment) support() {
	s := a.r.Support
	if s.ContainerEvents.Availability == Unsupported {
		a.add(Finding{
			ID: "no-event-stream", Severity: Info, Operation: "get_container_events",
			Title:    "The runtime has no container event stream",
			Evidence: []string{"GetContainerEvents: " + s.ContainerEvents.Detail},
			Action: "Evented mode is not available: pleg relists every second, as the kubelet does. containerd 2.x has the " +
				"stream; CRI-O needs enable_pod_events = true.",
		})
	}
	if s.ContainerEvents.Availability == Supported && s.PodRemovalEvents.Availability == Unsupported {
		a.add(Finding{
			ID: "untold-pod-removals", Severity: Info, Operation: "get_container_events",
			Title:    "The event stream does not tell when a pod is removed",
			Evidence: []string{"pod removal events: " + s.PodRemovalEvents.Detail},
			Action: "pleg in evented mode lists the exited sandboxes every second to find those removals, " +
				"at no cost while every pod runs; the kubelet's Evented PLEG sees them only at its relist, every 300 s.",
		})
	}
	large := false
	for _, l := range a.r.Lists {
		large = large || float64(l.Bytes) >= float64(l.LimitBytes)/2
	}
	if large && (s.StreamContainers.Availability == Unsupported || s.StreamPodSandboxes.Availability == Unsupported) {
		a.add(Finding{
			ID:        "no-streaming-lists",
			Severity:  Info,
			Operation: opStreamContainers,
			Title:     "The runtime has no streaming lists",
			Evidence: []string{
				"StreamContainers: " + s.StreamContainers.Detail,
				"StreamPodSandboxes: " + s.StreamPodSandboxes.Detail,
			},
			Action: "Large lists must fit one message; runtimes with CRIListStreaming send them in parts.",
		})
	}
}
