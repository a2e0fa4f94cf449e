// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plegkit/pleg/kubereport"
)

// extrapolateTo is the fleet the table extrapolates to.
const extrapolateTo = 5000

// summary is the fleet's table, in Markdown: a row a fleet size, and the
// largest one's per-node figures extrapolated to extrapolateTo nodes.
func summary(results []result) string {
	if len(results) == 0 {
		return "no fleet ran\n"
	}
	var b strings.Builder
	r0 := results[0]
	fmt.Fprintf(&b, "pleg run --mode %s (relist every 1 s), each over `pleg sim` (%d pods × 3 containers, churn); --timeout %v; "+
		"requests are pleg's, from kube-apiserver's apiserver_request_total read every second; "+
		"at rest: %v; per-node bound %v requests at once, %v a second (at most %v in any 1 s)\n\n",
		r0.mode, r0.pods, runtimeTimeout, r0.rest, kubereport.DefaultBurst, kubereport.DefaultQPS, perNodeAllowed(time.Second))
	b.WriteString("| nodes | at rest: requests/s (per node) | incident: requests, peak/s (per node) | recovery: requests, peak/s (per node) " +
		"| stop: peak/s (per node) | CPU per daemon, mean (max) | RSS per daemon, mean (max) | runtime CPU, mean | API server CPU at rest |\n")
	b.WriteString("|---:|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		n := float64(r.size)
		fmt.Fprintf(&b, "| %d | %.3f (%.4f) | %v, %.1f (%.2f) | %v, %.1f (%.2f) | %.1f (%.2f) | %.2f%% (%.2f%%) | %s (%s) | %.2f%% | %.1f%% |\n",
			r.size,
			r.atRest.rate(), r.atRest.rate()/n,
			r.incident.requests, r.incident.peak, r.incident.peak/n,
			r.recovery.requests, r.recovery.peak, r.recovery.peak/n,
			r.stop.peak, r.stop.peak/n,
			100*mean(r.daemonCPU), 100*slices.Max(r.daemonCPU),
			mib(mean(r.daemonRSS)), mib(slices.Max(r.daemonRSS)),
			100*mean(r.runtimeCPU),
			100*r.apiServerCPU)
	}
	big := results[len(results)-1]
	n := float64(big.size)
	fmt.Fprintf(&b, "| %d (from %d) | %.1f | %.0f, %.0f | %.0f, %.0f | %.0f | | | | |\n",
		extrapolateTo, big.size,
		big.atRest.rate()/n*extrapolateTo,
		big.incident.requests/n*extrapolateTo, big.incident.peak/n*extrapolateTo,
		big.recovery.requests/n*extrapolateTo, big.recovery.peak/n*extrapolateTo,
		big.stop.peak/n*extrapolateTo)
	return b.String()
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func mib(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }
