// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/plegkit/pleg/doctor/internal/format"
	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/runtime"
)

func (a *assessment) lists() {
	for _, l := range a.r.Lists {
		name := rpcName(l.Operation)
		share := float64(l.Bytes) / float64(l.LimitBytes)
		sizeEv := fmt.Sprintf(
			"%s answers %s for %d items: %.1f%% of the kubelet's %s limit",
			name,
			msgsize.Bytes(l.Bytes),
			l.Items,
			100*share,
			msgsize.Bytes(l.LimitBytes),
		)
		if l.Items == 0 && l.Bytes > 0 {
			sizeEv = fmt.Sprintf(
				"%s answers %s: %.1f%% of the kubelet's %s limit",
				name,
				msgsize.Bytes(l.Bytes),
				100*share,
				msgsize.Bytes(l.LimitBytes),
			)
		}
		action := "Remove what the list carries that is dead: exited containers (crictl rm $(crictl ps -a -q --state " +
			"exited)) and not-ready sandboxes (crictl rmp $(crictl pods -q --state notready)); then find why they pile up " +
			"(see the dead containers finding). " +
			"The kubelet's client cannot take more than 16 MiB; a runtime and kubelet with the streaming lists " +
			"(CRIListStreaming) do not have the limit, and pleg run reads up to its --max-list-size (24 MiB by default) and " +
			"streams where it can."
		switch {
		case l.Bytes > l.LimitBytes:
			a.add(Finding{
				ID: "list-too-large", Severity: Critical, Operation: l.Operation,
				Title:    fmt.Sprintf("%s is over the kubelet's message limit", name),
				Evidence: []string{sizeEv, "the kubelet's every relist fails with ResourceExhausted: PLEG is unhealthy for good"},
				Action:   action,
			})
			continue
		case l.Error != "":
			a.add(Finding{
				ID:        "list-failed",
				Severity:  Critical,
				Operation: l.Operation,
				Title:     fmt.Sprintf("%s fails", name),
				Evidence: []string{
					l.Error,
					"the kubelet's relist fails with it, every time: PLEG turns unhealthy after " + a.threshold().String(),
				},
				Action: "Read the runtime's logs at the time of the failure; a list that hangs points at a runtime lock held " +
					"by a stuck operation: take its goroutine stacks (" + a.rt.stacks(0) + ").",
			})
			continue
		case share >= msgsize.Near:
			a.add(Finding{
				ID: "list-near-limit", Severity: Warning, Operation: l.Operation,
				Title:    fmt.Sprintf("%s is near the kubelet's message limit", name),
				Evidence: []string{sizeEv, "past the limit, every kubelet relist fails and PLEG is unhealthy for good"},
				Action:   action,
			})
		}
		if op := a.operation(l.Operation); op != nil && op.Errors+op.Timeouts > 0 {
			a.add(Finding{
				ID: "list-flaky", Severity: Warning, Operation: l.Operation,
				Title: fmt.Sprintf("%s fails now and then", name),
				Evidence: []string{fmt.Sprintf("%d of %d calls failed", op.Errors+op.Timeouts, op.Calls), "each failure aborts a " +
					"kubelet relist; consecutive ones age its health"},
				Action: "Read the runtime's logs at the time of the failures.",
			})
		}
	}
}

func (a *assessment) listItems(op string) int {
	for _, l := range a.r.Lists {
		if l.Operation == op {
			return l.Items
		}
	}
	return 0
}

// tooManyPods judges the relist in which every pod changed, as after a
// kubelet or runtime restart.
func (a *assessment) tooManyPods(hung map[string]bool) {
	p := a.r.Projection
	worst := format.Seconds(p.KubeletWorstSeconds)
	// Hung pods have their own finding; this one is about speed.
	for _, pod := range a.r.pods {
		if hung[pod.pod.UID] {
			worst -= pod.kubeletCost(a.requestTimeout())
		}
	}
	if p.Pods == 0 || worst < format.Seconds(p.AlertSeconds) {
		return
	}
	ev := []string{
		fmt.Sprintf("%d pods, %s each on average, one after the other", p.Pods, format.Duration(worst/time.Duration(p.Pods))),
		fmt.Sprintf(
			"pleg, inspecting %d at a time with a %v deadline per pod: %s",
			p.PlegConcurrency,
			format.Seconds(p.PlegInspectTimeoutSeconds),
			format.Duration(format.Seconds(p.PlegWorstSeconds)),
		),
	}
	f := Finding{
		ID: "too-many-pods", Severity: Info,
		Title:    fmt.Sprintf("A kubelet relist in which every pod changed would take %s", format.Duration(worst)),
		Evidence: ev,
		Action: "Fewer pods per node (the kubelet's --max-pods), a faster runtime, or fewer calls per pod: every " +
			"container, exited ones included, costs a status call. " +
			"pleg inspects pods in parallel.",
	}
	if worst > a.threshold() {
		f.Severity = Warning
		f.Title += fmt.Sprintf(
			", past the %v threshold: the node goes NotReady after a kubelet or runtime restart",
			a.threshold(),
		)
	}
	a.add(f)
}

func (a *assessment) deadContainers() {
	w := a.r.Workload
	if w.ContainersExited < deadContainers && w.BeyondCollection < deadContainers/10 {
		return
	}
	ev := []string{
		fmt.Sprintf(
			"%d exited containers beside %d running; "+
				"%d of them more than the kubelet's collector keeps (one per container name)",
			w.ContainersExited,
			w.ContainersRunning,
			w.BeyondCollection,
		),
	}
	if total := w.ContainersRunning + w.ContainersExited + w.ContainersCreated + w.ContainersUnknown; total > 0 {
		for _, l := range a.r.Lists {
			if l.Operation == runtime.OpListContainers && l.Bytes > 0 {
				ev = append(
					ev,
					fmt.Sprintf(
						"they make about %s of the %s ListContainers answer the kubelet reads every second",
						msgsize.Bytes(l.Bytes*w.ContainersExited/total),
						msgsize.Bytes(l.Bytes),
					),
				)
			}
		}
	}
	var most []string
	for _, pc := range w.MostExited {
		most = append(most, fmt.Sprintf("%s (%d)", pc.Pod, pc.Count))
	}
	if len(most) > 0 {
		ev = append(ev, "most in "+strings.Join(most, ", "))
	}
	f := Finding{
		ID: "dead-containers", Severity: Info,
		Title:    fmt.Sprintf("%d exited containers are kept", w.ContainersExited),
		Evidence: ev,
		Action: "Find why the kubelet's garbage collection does not remove them (its logs, " +
			"--maximum-dead-containers-per-container) and which pods crash-loop (crictl ps -a --state exited); " +
			"remove them with crictl rm $(crictl ps -a -q --state exited).",
	}
	if w.ContainersExited >= deadContainers {
		// Thousands of exited containers weigh on every relist: the
		// cause of the slow relists beside them.
		f.Severity, f.cause = Warning, true
		f.Title = fmt.Sprintf("%d exited containers weigh on every relist", w.ContainersExited)
	}
	a.add(f)
}
