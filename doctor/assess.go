// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/plegkit/pleg/doctor/internal/format"
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
	// listNearLimit is the share of the kubelet's message limit where a
	// list is near it.
	listNearLimit = 0.75
	// deadContainers is where exited containers weigh on every relist.
	deadContainers = 1000
	// podsNamed bounds the per-pod findings of one kind.
	podsNamed = 5
)

// assess derives the findings and the verdict from what was gathered.
func assess(r *Report) {
	a := &assessment{r: r}
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
	slices.SortStableFunc(a.found, func(x, y Finding) int { return x.Severity.rank() - y.Severity.rank() })
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
	r     *Report
	found []Finding
}

func (a *assessment) add(f Finding) { a.found = append(a.found, f) }

func (a *assessment) threshold() time.Duration {
	return format.Seconds(a.r.Projection.ThresholdSeconds)
}

func (a *assessment) requestTimeout() time.Duration {
	return format.Seconds(a.r.Projection.RuntimeRequestTimeoutSeconds)
}

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
		Action: "Check that the runtime runs and listens there: systemctl status containerd (or crio); " +
			"journalctl -u containerd --since -30m; crictl --runtime-endpoint " + a.r.Endpoint + " version. " +
			"Compare the endpoint with the kubelet's --container-runtime-endpoint. " +
			"A runtime that accepts the connection but never answers is hung: take a goroutine dump (kill -USR1 on " +
			"containerd) before restarting it.",
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
				Action:   "The kubelet marks the node NotReady; read the runtime's logs for why (journalctl -u containerd).",
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

func (a *assessment) lists() {
	for _, l := range a.r.Lists {
		name := rpcName(l.Operation)
		share := float64(l.Bytes) / float64(l.LimitBytes)
		sizeEv := fmt.Sprintf(
			"%s answers %s for %d items: %.1f%% of the kubelet's %s limit",
			name,
			format.Bytes(l.Bytes),
			l.Items,
			100*share,
			format.Bytes(l.LimitBytes),
		)
		if l.Items == 0 && l.Bytes > 0 {
			sizeEv = fmt.Sprintf(
				"%s answers %s: %.1f%% of the kubelet's %s limit",
				name,
				format.Bytes(l.Bytes),
				100*share,
				format.Bytes(l.LimitBytes),
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
					"by a stuck operation (take a goroutine dump: kill -USR1 on containerd).",
			})
			continue
		case share >= listNearLimit:
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

func (a *assessment) operation(name string) *Operation {
	for i := range a.r.Operations {
		if a.r.Operations[i].Name == name {
			return &a.r.Operations[i]
		}
	}
	return nil
}

// hungPods adds a finding per pod with a call that got no answer, and
// returns those pods.
func (a *assessment) hungPods() map[string]bool {
	hung := make(map[string]bool)
	var pods []*podResult
	for _, p := range a.r.pods {
		if p.hung() {
			hung[p.pod.UID] = true
			pods = append(pods, p)
		}
	}
	timeout := format.Seconds(a.r.Inspection.CallTimeoutSeconds)
	for i, p := range pods {
		if i == podsNamed {
			a.add(Finding{
				ID: "hung-pod", Severity: Critical,
				Title:    fmt.Sprintf("%d more pods do not answer", len(pods)-podsNamed),
				Evidence: []string{"see the slowest pods"},
				Action:   "As for the pods above.",
			})
			break
		}
		var c call
		for _, x := range p.calls {
			if x.hung {
				c = x
			}
		}
		what := rpcName(c.op)
		crictl := "crictl inspectp " + c.target
		if c.op == runtime.OpContainerStatus {
			what = fmt.Sprintf("%s of container %q", what, c.target)
			crictl = "crictl inspect " + c.id
		} else if c.target != "" {
			what = fmt.Sprintf("%s of sandbox %s", what, format.ShortID(c.target))
		}
		pod := p.pod
		a.add(Finding{
			ID: "hung-pod", Severity: Critical, Pod: &pod, Operation: c.op,
			Title: fmt.Sprintf("Pod %s does not answer: %s got no answer within %v", pod, what, timeout),
			Evidence: []string{
				fmt.Sprintf("the kubelet waits %v (--runtime-request-timeout) for it in every relist that inspects the pod, and "+
					"inspects it again in every relist while it fails",
					a.requestTimeout()),
				fmt.Sprintf(
					"so every relist takes at least %v (%v for each such pod, %s), against the %v threshold",
					time.Duration(len(pods))*a.requestTimeout(),
					a.requestTimeout(),
					plural(len(pods), "pod here", "pods here"),
					a.threshold(),
				),
			},
			Action: "Find what blocks it: " + crictl + " hangs the same way; look for its shim (ps -ef | grep " +
				"containerd-shim), processes in D state (ps -eo pid,stat,cmd | awk '$2 ~ /D/'), " +
				"hung-task and I/O errors in dmesg, an unreachable network volume. Force-deleting the pod or restarting the " +
				"runtime frees the kubelet's relist; " +
				"pleg inspects pods in parallel with a per-pod deadline, so one such pod does not stall it.",
		})
	}
	return hung
}

// slowPods adds a finding per pod whose inspection stands out, and returns
// those pods.
func (a *assessment) slowPods(hung map[string]bool) map[string]bool {
	slow := make(map[string]bool)
	if len(a.r.pods) == 0 {
		return slow
	}
	took := make([]time.Duration, 0, len(a.r.pods))
	for _, p := range a.r.pods {
		took = append(took, p.measured())
	}
	slices.Sort(took)
	median := quantile(took, 0.5)
	floor := max(slowCall, slowPodFactor*median)

	sorted := slices.Clone(a.r.pods)
	slices.SortFunc(sorted, byCost)
	named := 0
	for _, p := range sorted {
		if hung[p.pod.UID] || p.measured() < floor {
			continue
		}
		slow[p.pod.UID] = true
		if named == podsNamed {
			continue
		}
		named++
		c := p.slowest()
		what := rpcName(c.op)
		inspect := "crictl inspectp " + c.target
		if c.op == runtime.OpContainerStatus {
			what = fmt.Sprintf("%s of container %q", what, c.target)
			inspect = "crictl inspect " + c.id
		}
		pod := p.pod
		a.add(Finding{
			ID: "slow-pod", Severity: Warning, Pod: &pod, Operation: c.op,
			Title: fmt.Sprintf("Pod %s is slow to inspect: %s takes %s", pod, what, format.Duration(c.took)),
			Evidence: []string{
				fmt.Sprintf(
					"its inspection takes %s over %d calls; the median pod's takes %s",
					format.Duration(p.measured()),
					len(p.calls),
					format.Duration(median),
				),
				"every kubelet relist in which the pod changed waits for it, and so does every other pod behind it",
			},
			Action: "Time " + inspect + " and look at what that container does to its runtime: a busy or stuck shim, a huge " +
				"log, a slow volume. " +
				"Restarting the pod usually clears it; pleg inspects it beside the others instead of before them.",
		})
	}
	if extra := len(slow) - named; extra > 0 {
		a.add(Finding{
			ID: "slow-pod", Severity: Warning,
			Title:    fmt.Sprintf("%d more pods are slow to inspect", extra),
			Evidence: []string{"see the slowest pods"},
			Action:   "As for the pods above.",
		})
	}
	return slow
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
			Action:   slowRuntimeAction,
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
			Action:   slowRuntimeAction,
		})
	case steady > period:
		a.add(Finding{ID: "relist-slow", Severity: Warning,
			Title:    fmt.Sprintf("A kubelet relist takes %s, longer than its %v period", format.Duration(steady), period),
			Evidence: append(ev, "relists run back to back and every event comes that much later"), Action: slowRuntimeAction})
	}
}

const slowRuntimeAction = "Look at the runtime's load: its CPU (top -p $(pidof containerd)), the disk under " +
	"/var/lib/containerd (iostat -x 1), " +
	"its logs for slow or failing operations; and at what the lists carry (exited containers, not-ready sandboxes). " +
	"Evented mode (pleg --mode auto) relists far less often."

func (a *assessment) p50(op string) float64 {
	if o := a.operation(op); o != nil {
		return o.P50Seconds
	}
	return 0
}

func (a *assessment) listItems(op string) int {
	for _, l := range a.r.Lists {
		if l.Operation == op {
			return l.Items
		}
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
			Action: slowRuntimeAction,
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
				Action: slowRuntimeAction,
			})
		}
	}
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
						format.Bytes(l.Bytes*w.ContainersExited/total),
						format.Bytes(l.Bytes),
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
		f.Severity = Warning
	}
	a.add(f)
}

func (a *assessment) failingPods() {
	var failing []string
	for _, p := range a.r.pods {
		if p.failed() && !p.hung() {
			for _, c := range p.calls {
				if c.err != nil {
					failing = append(failing, fmt.Sprintf("%s: %s %s", p.pod, rpcName(c.op), c.describe()))
					break
				}
			}
		}
	}
	if len(failing) == 0 {
		return
	}
	a.add(Finding{
		ID: "inspection-errors", Severity: Warning,
		Title: fmt.Sprintf("The inspection of %d pods fails", len(failing)),
		Evidence: append(failing[:min(len(failing), podsNamed)], "the kubelet caches the error and inspects such pods "+
			"again in every relist"),
		Action: "Read the runtime's logs about those pods; crictl inspectp and crictl inspect on their sandboxes and " +
			"containers show the same errors.",
	})
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

func (a *assessment) daemon() {
	d := a.r.Daemon
	if d == nil {
		return
	}
	switch {
	case d.Error != "" && d.Health == "":
		a.add(Finding{
			ID: "daemon-unreadable", Severity: Warning,
			Title:    "The pleg daemon could not be read",
			Evidence: []string{d.URL, d.Error},
			Action:   "Check that pleg run serves there (--listen) and that this host may reach it.",
		})
		return
	case !d.Healthy:
		ev := []string{d.URL + "/healthz: " + d.Health}
		if d.RelistRunningSeconds > 0 {
			ev = append(
				ev,
				fmt.Sprintf("a relist has been running for %s", format.Duration(format.Seconds(d.RelistRunningSeconds))),
			)
		}
		a.add(Finding{
			ID: "daemon-unhealthy", Severity: Critical,
			Title:    "The pleg daemon reports itself unhealthy",
			Evidence: ev,
			Action: "The findings above say why; its logs (journalctl -u pleg or kubectl logs) name the pods it could not " +
				"inspect.",
		})
	case d.Error != "":
		a.add(Finding{
			ID: "daemon-unreadable", Severity: Warning,
			Title:    "The pleg daemon's metrics could not be read",
			Evidence: []string{d.URL, d.Error},
			Action:   "Check that the daemon serves /metrics.",
		})
	}
	if alert := format.Seconds(a.r.Projection.AlertSeconds); format.Seconds(d.RelistP99Seconds) >= alert {
		a.add(Finding{
			ID:       "daemon-relist-slow",
			Severity: Warning,
			Title: fmt.Sprintf(
				"The pleg daemon's relists take %s at p99",
				format.Duration(format.Seconds(d.RelistP99Seconds)),
			),
			Evidence: []string{
				fmt.Sprintf(
					"%d relists, p50 %s, p99 %s, estimated from kubelet_pleg_relist_duration_seconds",
					d.Relists,
					format.Duration(format.Seconds(d.RelistP50Seconds)),
					format.Duration(format.Seconds(d.RelistP99Seconds)),
				),
			},
			Action: slowRuntimeAction,
		})
	}
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
