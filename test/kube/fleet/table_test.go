// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/plegkit/pleg/kubereport"
)

// extrapolateTo is the fleet the table extrapolates to.
const extrapolateTo = 5000

// summary is the fleet's tables, in Markdown: what the API server saw,
// and what the nodes and Prometheus did; a row a fleet size, and the
// largest one's per-node figures extrapolated to extrapolateTo nodes.
func summary(results []result) string {
	if len(results) == 0 {
		return "no fleet ran\n"
	}
	var b strings.Builder
	r0 := results[0]
	fmt.Fprintf(&b, "pleg run --mode %s (relist every %v), each over `pleg sim` (%d pods × 3 containers, churn); --timeout %v; "+
		"requests are pleg's, from kube-apiserver's apiserver_request_total read every second; at rest: %v; "+
		"Prometheus scrapes each daemon every %v (the chart's podMonitor.interval); "+
		"per-node bound: %v request at once, %v a second (at most %v + %v·d in any d seconds); "+
		"closest to the bound: the largest share of it any interval between two reads of the counters used\n\n",
		r0.mode, r0.relist, r0.pods, runtimeTimeout, r0.rest, r0.scrapes.interval,
		kubereport.DefaultBurst, kubereport.DefaultQPS, kubereport.DefaultBurst, kubereport.DefaultQPS)
	apiServerTable(&b, results)
	b.WriteString("\n")
	nodeTable(&b, results)
	return b.String()
}

// apiServerTable is pleg's requests to the API server in each phase, and
// the largest share of the bound any interval of any phase used.
func apiServerTable(b *strings.Builder, results []result) {
	b.WriteString("| nodes | at rest: requests/s (per node) | incident: requests, peak/s (per node) " +
		"| recovery: requests, peak/s (per node) | stop: requests, peak/s (per node) | closest to the bound " +
		"| API server CPU at rest |\n")
	b.WriteString("|---:|---|---|---|---|---|---|\n")
	for _, r := range results {
		n := float64(r.size)
		closest := max(r.atRest.closest, r.incident.closest, r.recovery.closest, r.stop.closest)
		fmt.Fprintf(b, "| %d | %.3f (%.4f) | %v, %.1f (%.2f) | %v, %.1f (%.2f) | %v, %.1f (%.2f) | %.0f%% | %.1f%% |\n",
			r.size,
			r.atRest.rate(), r.atRest.rate()/n,
			r.incident.requests, r.incident.peak, r.incident.peak/n,
			r.recovery.requests, r.recovery.peak, r.recovery.peak/n,
			r.stop.requests, r.stop.peak, r.stop.peak/n,
			100*closest, 100*r.apiServerCPU)
	}
	big := results[len(results)-1]
	x := extrapolateTo / float64(big.size)
	fmt.Fprintf(b, "| %d (×%g from %d) | %.1f | %.0f, %.0f | %.0f, %.0f | %.0f, %.0f | | |\n",
		extrapolateTo, x, big.size,
		big.atRest.rate()*x,
		big.incident.requests*x, big.incident.peak*x,
		big.recovery.requests*x, big.recovery.peak*x,
		big.stop.requests*x, big.stop.peak*x)
}

// nodeTable is what each node's daemon cost its node and Prometheus at
// rest.
func nodeTable(b *strings.Builder, results []result) {
	b.WriteString("| nodes | relist every, mean (slowest) | CPU per daemon, mean (max) | RSS per daemon, mean (max) " +
		"| runtime CPU, mean | series per scrape, mean (max) | bytes per scrape: body, gzip | scrape duration, mean " +
		"| Prometheus: samples/s (per node) | Prometheus: head series, RSS, CPU | load average |\n")
	b.WriteString("|---:|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		s := r.scrapes
		fmt.Fprintf(b, "| %d | %.2fs (%.2fs) | %.2f%% (%.2f%%) | %s (%s) | %.2f%% | %.0f (%.0f) | %s, %s | %.1f ms "+
			"| %.0f (%.1f) | %.0f, %s, %.1f%% | %s |\n",
			r.size,
			mean(s.relistInterval), slices.Max(s.relistInterval),
			100*mean(r.daemonCPU), 100*slices.Max(r.daemonCPU),
			mib(mean(r.daemonRSS)), mib(slices.Max(r.daemonRSS)),
			100*mean(r.runtimeCPU),
			mean(s.samples), slices.Max(s.samples),
			kib(mean(s.bodyBytes)), kib(mean(s.gzipBytes)),
			1000*mean(s.duration),
			s.appendedPerSecond, s.appendedPerSecond/float64(r.size),
			s.headSeries, mib(s.rss), 100*s.cpu,
			r.load)
	}
	big := results[len(results)-1]
	x := extrapolateTo / float64(big.size)
	s := big.scrapes
	fmt.Fprintf(b, "| %d (×%g from %d) | | | | | | %s/s gzip | | %.0f | %.0f series | |\n",
		extrapolateTo, x, big.size,
		mib(mean(s.gzipBytes)*extrapolateTo/s.interval.Seconds()),
		s.appendedPerSecond*x, s.headSeries*x)
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

func kib(bytes float64) string { return fmt.Sprintf("%.1f KiB", bytes/(1<<10)) }
