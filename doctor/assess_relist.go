// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"slices"
	"time"

	"github.com/plegkit/pleg/doctor/internal/format"
	"github.com/plegkit/pleg/runtime"
)

func (a *assessment) operation(name string) *Operation {
	for i := range a.r.Operations {
		if a.r.Operations[i].Name == name {
			return &a.r.Operations[i]
		}
	}
	return nil
}

// relist judges the kubelet's relist when nothing changes: the lists, and
// the reinspection of failing pods that do answer (hung ones have their
// own finding).
func (a *assessment) relist(hung map[string]bool) {
	p := a.r.Projection
	steady := format.Seconds(p.SteadySeconds)
	for _, pod := range a.r.pods {
		if hung[pod.pod.UID] {
			steady -= pod.kubeletCost(a.requestTimeout())
		}
	}
	ev := []string{
		fmt.Sprintf(
			"listing %d sandboxes and %d containers takes %s",
			a.listItems(runtime.OpListPodSandbox),
			a.listItems(runtime.OpListContainers),
			format.Duration(format.Seconds(a.p50(runtime.OpListPodSandbox))+format.Seconds(a.p50(runtime.OpListContainers))),
		),
	}
	period, alert := format.Seconds(p.PeriodSeconds), format.Seconds(p.AlertSeconds)
	switch {
	case steady > a.threshold():
		a.add(Finding{
			ID:       "relist-over-threshold",
			Severity: Critical,
			Title: fmt.Sprintf(
				"A kubelet relist takes %s even when nothing changes, past the %v threshold",
				format.Duration(steady),
				a.threshold(),
			),
			Evidence: ev,
			Action:   a.slowRuntimeAction(),
		})
	case steady >= alert:
		a.add(Finding{
			ID:       "relist-slow",
			Severity: Warning,
			Title: fmt.Sprintf(
				"A kubelet relist takes %s even when nothing changes: KubeletPlegDurationHigh fires at %v",
				format.Duration(steady),
				alert,
			),
			Evidence: ev,
			Action:   a.slowRuntimeAction(),
		})
	case steady > period:
		a.add(Finding{ID: "relist-slow", Severity: Warning,
			Title:    fmt.Sprintf("A kubelet relist takes %s, longer than its %v period", format.Duration(steady), period),
			Evidence: append(ev, "relists run back to back and every event comes that much later"),
			Action:   a.slowRuntimeAction()})
	}
}

// slowRuntimeAction is what to look at when the runtime is slow, in the
// words of the runtime in use.
func (a *assessment) slowRuntimeAction() string {
	proc := map[string]string{containerdKind.name: "containerd", crioKind.name: "crio",
		dockerKind.name: "dockerd"}[a.rt.name]
	top := "top -p $(pidof " + cmpOr(proc, "containerd") + ")"
	return "Look at the runtime's load: its CPU (" + top + "), the disk under " + a.rt.root + " (iostat -x 1), " +
		"its logs for slow or failing operations (" + a.rt.journal + "); and at what the lists carry (exited containers, " +
		"not-ready sandboxes). Evented mode (pleg --mode auto) relists far less often."
}

func (a *assessment) p50(op string) float64 {
	if o := a.operation(op); o != nil {
		return o.P50Seconds
	}
	return 0
}

// slowOperations flags operations that are slow across pods: the calls of
// pods already named are left out, so one bad pod does not make its
// operation look slow everywhere.
func (a *assessment) slowOperations(slow, hung map[string]bool) {
	byOp := make(map[string][]time.Duration)
	for _, p := range a.r.pods {
		if slow[p.pod.UID] || hung[p.pod.UID] {
			continue
		}
		for _, c := range p.calls {
			byOp[c.op] = append(byOp[c.op], c.took)
		}
	}
	ops := []string{opListPodSandboxByPod, runtime.OpPodSandboxStatus, opListContainersByPod, runtime.OpContainerStatus}
	for _, op := range ops {
		took := byOp[op]
		if len(took) == 0 {
			continue
		}
		slices.Sort(took)
		p50, p99 := quantile(took, 0.5), quantile(took, 0.99)
		if p99 < slowCall {
			continue
		}
		a.add(Finding{
			ID: "slow-operation", Severity: Warning, Operation: op,
			Title: fmt.Sprintf("%s is slow across pods: p99 %s", rpcName(op), format.Duration(p99)),
			Evidence: []string{
				fmt.Sprintf(
					"p50 %s, p99 %s, max %s over %d calls outside the pods named above",
					format.Duration(p50),
					format.Duration(p99),
					format.Duration(took[len(took)-1]),
					len(took),
				),
				"an idle containerd answers in about a millisecond",
			},
			Action: a.slowRuntimeAction(),
		})
	}
	for _, op := range []string{runtime.OpListPodSandbox, runtime.OpListContainers} {
		if o := a.operation(op); o != nil && format.Seconds(o.P50Seconds) >= slowList {
			a.add(Finding{
				ID:        "slow-operation",
				Severity:  Warning,
				Operation: op,
				Title:     fmt.Sprintf("%s is slow: p50 %s", rpcName(op), format.Duration(format.Seconds(o.P50Seconds))),
				Evidence: []string{
					fmt.Sprintf(
						"p50 %s, p99 %s over %d calls; the kubelet makes it every relist",
						format.Duration(format.Seconds(o.P50Seconds)),
						format.Duration(format.Seconds(o.P99Seconds)),
						o.Calls,
					),
				},
				Action: a.slowRuntimeAction(),
			})
		}
	}
}

func (a *assessment) coverage() {
	in := a.r.Inspection
	w := a.r.Workload
	if in.Pods == w.Pods {
		return
	}
	why := "sampled with --sample"
	if in.StoppedEarly != "" {
		why = "stopped early: " + in.StoppedEarly
	}
	a.add(Finding{
		ID: "partial-inspection", Severity: Info,
		Title:    fmt.Sprintf("%d of %d pods inspected", in.Pods, w.Pods),
		Evidence: []string{why, "the projections scale the inspected pods' cost to every pod"},
		Action:   "Give a larger --budget or a higher --concurrency to inspect them all.",
	})
}
