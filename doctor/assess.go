// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"strconv"
	"time"

	"github.com/plegkit/pleg/doctor/internal/format"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/runtime"
)

// Thresholds of the assessment. Healthy containerd answers a status call
// in about a millisecond and lists a hundred pods in a few.
const (
	// slowCall is where a status call, or a per-pod list, is slow: a
	// hundred pods of four calls at that speed make a 40 s relist.
	slowCall = 100 * time.Millisecond
	// slowList is where a whole-node list is slow: half the relist period
	// gone on one list.
	slowList = 500 * time.Millisecond
	// slowPodFactor: a pod is slow when its inspection takes this many
	// times the median pod's, and at least slowCall.
	slowPodFactor = 10
	// deadContainers is where exited containers weigh on every relist.
	deadContainers = 1000
	// podsNamed bounds the per-pod findings of one kind.
	podsNamed = 5
)

// assess derives the findings and the verdict from what was gathered. It
// is the checks' table of contents; each subject has a file of its own:
// the runtime itself (assess_runtime.go), the node-wide lists and the
// workload's size (assess_lists.go), one pod's calls (assess_pods.go),
// the relist against the threshold (assess_relist.go), the pleg daemon
// beside it (assess_daemon.go), and the node below the CRI
// (node*.go, the same findings as a flight recording's). The findings
// are then ranked, the cause first (rank.go).
func assess(r *Report) {
	a := &assessment{r: r, rt: kindOf(r.Runtime.Name, runtimeComm(r.Node), r.Endpoint)}
	if !r.Runtime.Reachable {
		a.unreachable()
	} else {
		a.runtimeConditions()
		a.lists()
		hung := a.hungPods()
		slow := a.slowPods(hung)
		a.relist(hung)
		a.slowOperations(slow, hung)
		a.tooManyPods(hung)
		a.deadContainers()
		a.failingPods()
		a.coverage()
		a.support()
	}
	a.daemon()
	if r.Node != nil {
		a.found = append(a.found, nodeFindings(liveView(r))...)
	}
	rankFindings(a.found)
	r.Findings = append([]Finding{}, a.found...)
	r.Verdict = Healthy
	for _, f := range r.Findings {
		switch f.Severity {
		case Critical:
			r.Verdict = Unhealthy
		case Warning:
			if r.Verdict == Healthy {
				r.Verdict = AtRisk
			}
		}
	}
}

type assessment struct {
	r *Report
	// rt is the runtime in use, whose tools the actions name.
	rt    runtimeKind
	found []Finding
}

// runtimeComm is the name of the runtime's process in a node's view.
func runtimeComm(rec *flightrec.Recording) string {
	if rec == nil || rec.Processes == nil {
		return ""
	}
	for _, p := range rec.Processes.List {
		if p.Role == flightrec.RoleRuntime {
			return p.Comm
		}
	}
	return ""
}

func (a *assessment) add(f Finding) { a.found = append(a.found, f) }

func (a *assessment) threshold() time.Duration {
	return format.Seconds(a.r.Projection.ThresholdSeconds)
}

func (a *assessment) requestTimeout() time.Duration {
	return format.Seconds(a.r.Projection.RuntimeRequestTimeoutSeconds)
}

// plural says n things, in the singular or the plural.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// rpcName is the CRI method behind an operation name.
func rpcName(op string) string {
	switch op {
	case runtime.OpVersion:
		return "Version"
	case runtime.OpStatus:
		return "Status"
	case runtime.OpListPodSandbox:
		return "ListPodSandbox"
	case runtime.OpListContainers:
		return "ListContainers"
	case opStreamPodSandboxes:
		return "StreamPodSandboxes"
	case opStreamContainers:
		return "StreamContainers"
	case opListPodSandboxByPod:
		return "ListPodSandbox (one pod)"
	case opListContainersByPod:
		return "ListContainers (one pod)"
	case runtime.OpPodSandboxStatus:
		return "PodSandboxStatus"
	case runtime.OpContainerStatus:
		return "ContainerStatus"
	}
	return op
}
