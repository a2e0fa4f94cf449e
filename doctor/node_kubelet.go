// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/kubeletpleg"
)

// kubelet judges the kubelet's own PLEG, as its metrics tell it, beside
// its process: behind while the runtime answers quickly, the cause is in
// the kubelet; starved of CPU or memory, or stuck in the kernel, it says
// which; waiting on a pod whose calls hang, that pod is the cause.
func (v *nodeView) kubelet() []Finding {
	k := v.rec.Kubelet
	proc, hasProc := v.kubeletProcess()
	behind, why := kubeletBehindBy(k)
	var starvation []string
	if hasProc {
		starvation = v.starvation(proc)
	}
	switch {
	case hasProc && (proc.State == "T" || proc.State == "t"):
		return nil // stopped: its own finding
	case behind == "" && len(starvation) > 0 && hasProc:
		// Its PLEG is not known to be behind, but the kubelet itself is
		// starved: tell it, below the causes that explain the node.
		return []Finding{{ID: "kubelet-starved", Severity: Warning, Evidence: append(starvation, why...),
			Title:  fmt.Sprintf("%s is starved: %s", v.who(proc), starvation[0]),
			Action: kubeletStarvedAction}}
	case behind == "":
		return nil
	}
	ev := append([]string{behind}, why...)
	ev = append(ev, v.answers.describe())
	sev := Warning
	if k != nil && (secondsDuration(k.LastSeenAgeSeconds) >= kubeletCritical+k.Period()-time.Second || k.Error != "") {
		sev = Critical
	}
	switch {
	case len(starvation) > 0:
		return []Finding{{ID: "kubelet-starved", Severity: sev, cause: true, Evidence: append(ev, starvation...),
			Title:  fmt.Sprintf("The kubelet's PLEG is behind because the kubelet itself is starved: %s", starvation[0]),
			Action: kubeletStarvedAction}}
	case hasProc && proc.State == "D" && proc.Held:
		return []Finding{{ID: "kubelet-stuck", Severity: sev, cause: true,
			Evidence: append(ev, describeProcess(proc)),
			Title:    fmt.Sprintf("The kubelet's PLEG is behind: %s is stuck in the kernel (D) in %s", v.who(proc), proc.WChan),
			Action: fmt.Sprintf("Read where it waits (cat /proc/%d/stack: a mount, the disk, memory reclaim) and the "+
				"kernel log (dmesg -T).", proc.Pid)}}
	case len(v.answers.hungPods) > 0:
		return []Finding{{ID: "kubelet-pleg-behind", Severity: sev, Evidence: ev,
			Title: "The kubelet's PLEG is behind: it waits on " + strings.Join(v.answers.hungPods, ", ") +
				", whose calls do not answer",
			Action: "The kubelet inspects changed pods one at a time, each call waiting up to its " +
				"--runtime-request-timeout (2m): the pod's finding above says what blocks it."}}
	case v.answers.quick():
		return []Finding{{ID: "kubelet-pleg-behind", Severity: sev, cause: true, Evidence: ev,
			Title: "The kubelet's PLEG is behind while the runtime answers quickly: the kubelet itself is stuck or " +
				"starved, not the runtime",
			Action: "Take the kubelet's goroutines (curl -sk -H \"Authorization: Bearer $TOKEN\" " +
				"https://127.0.0.1:10250/debug/pprof/goroutine?debug=2, with --enable-debugging-handlers) and its log " +
				"(journalctl -u kubelet: slow SyncLoop, long relists); restarting the kubelet resets its PLEG."}}
	}
	return []Finding{{ID: "kubelet-pleg-behind", Severity: sev, Evidence: ev,
		Title:  "The kubelet's PLEG is behind: " + v.answers.describe(),
		Action: "The findings above say why the runtime does not answer; the kubelet's PLEG follows it."}}
}

const kubeletStarvedAction = "Keep CPU and memory for the kubelet: --kube-reserved and --system-reserved, the " +
	"kubelet in a cgroup of its own (kubeReservedCgroup), limits on the pods that take the node; find them with " +
	"kubectl top pods -A. A starved kubelet relists late and its PLEG turns unhealthy whatever the runtime does."

func (v *nodeView) kubeletProcess() (flightrec.Process, bool) {
	for _, p := range v.processes() {
		if p.Role == flightrec.RoleKubelet {
			return p, true
		}
	}
	return flightrec.Process{}, false
}

// kubeletBehindBy says how the kubelet's PLEG is behind, "" if it is not
// (or it is not known), with what the read said beside it.
func kubeletBehindBy(k *kubeletpleg.Reading) (string, []string) {
	if k == nil {
		return "", nil
	}
	var why []string
	if k.Error != "" {
		if strings.Contains(k.Error, "no answer within") {
			return "the kubelet's metrics did not answer: " + k.Error + " (from " + k.Source + ")", nil
		}
		return "", nil // not readable: told by the read's own finding
	}
	relists := k.Relists
	if k.RecentRelists != nil {
		relists = *k.RecentRelists
	}
	if relists.Count > 0 {
		why = append(why, fmt.Sprintf("its relists: p50 %s, p99 %s%s over %d (kubelet_pleg_relist_duration_seconds)",
			fmtSeconds(relists.P50Seconds), map[bool]string{true: "at least "}[relists.Beyond],
			fmtSeconds(relists.P99Seconds), relists.Count))
	}
	age := secondsDuration(k.LastSeenAgeSeconds)
	switch {
	case !k.LastSeen.IsZero() && age >= kubeletBehind+k.Period()-time.Second:
		return fmt.Sprintf("its PLEG was last seen active %s ago (kubelet_pleg_last_seen_seconds, read from %s); it "+
			"turns unhealthy at %d minutes%s", fmtSeconds(k.LastSeenAgeSeconds), k.Source, int(k.Threshold().Minutes()),
			map[bool]string{true: " (EventedPLEG: its relist runs every 5 minutes)"}[k.Evented]), why
	case relists.Count > 0 && secondsDuration(relists.P99Seconds) >= AlertThreshold:
		return fmt.Sprintf("its relists take %s%s at p99, where KubeletPlegDurationHigh fires",
			map[bool]string{true: "at least "}[relists.Beyond], fmtSeconds(relists.P99Seconds)), why
	}
	return "", why
}

// starvation says what starves a process: its wait for a CPU, its
// cgroup's quota, the node's CPU or memory pressure; nothing if nothing
// does.
func (v *nodeView) starvation(p flightrec.Process) []string {
	var out []string
	if share, ok := starved(p); ok {
		out = append(out, fmt.Sprintf("its threads waited %s for a CPU over %s, %s of the time they wanted one",
			fmtSeconds(p.Sched.WaitedSeconds), fmtSeconds(p.Sched.WindowSeconds), percent(share)))
	}
	if q, ok := throttled(p); ok {
		out = append(out, q)
	}
	if h := v.rec.Host; h != nil && len(out) > 0 {
		for _, res := range []string{"cpu", "memory"} {
			if pr, ok := h.Pressure[res]; ok && pr.SomeAvg10 >= pressureWarning {
				out = append(out, fmt.Sprintf("%s pressure %.0f%%", res, pr.SomeAvg10))
			}
		}
	}
	if h := v.rec.Host; h != nil && len(out) == 0 {
		if pr, ok := h.Pressure["memory"]; ok && pr.SomeAvg10 >= pressureCritical {
			out = append(out, fmt.Sprintf("memory pressure %.0f%%: every task stalls in reclaim", pr.SomeAvg10))
		}
		for _, l := range h.KernelLog {
			if m := killedName.FindStringSubmatch(l); m != nil && cmpOr(m[1], m[2]) == "kubelet" {
				out = append(out, "the kernel's OOM killer killed it: "+l)
			}
		}
	}
	return out
}

// kubeletReadFinding tells the kubelet's metrics could not be read, with
// why: the way to read them is the operator's to fix.
func kubeletReadFinding(k *kubeletpleg.Reading) []Finding {
	if k == nil || k.Error == "" || strings.Contains(k.Error, "no answer within") {
		return nil
	}
	return []Finding{{ID: "kubelet-unread", Severity: Info,
		Title:    "The kubelet's own PLEG could not be read",
		Evidence: []string{k.Source, k.Error},
		Action: "Give pleg doctor a credential that may get nodes/metrics: --kubelet-token-file, or --kubeconfig " +
			"(through the API server's node proxy, which needs nodes/proxy), and the kubelet's CA " +
			"(--kubelet-ca-file) or --kubelet-insecure-skip-tls-verify; --kubelet none skips it."}}
}
