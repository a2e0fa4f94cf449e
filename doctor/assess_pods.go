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
				a.rt.shim + "), processes in D state (ps -eo pid,stat,cmd | awk '$2 ~ /D/'), " +
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
