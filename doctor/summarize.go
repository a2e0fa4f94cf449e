// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"cmp"
	"slices"
	"time"

	"github.com/plegkit/pleg/runtime"
)

// summarize turns the calls into the report's operations, slowest pods and
// containers, and the projection.
func (d *diagnosis) summarize() {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.rep
	r.Operations = []Operation{}
	for _, op := range operationOrder {
		if calls := d.calls[op]; len(calls) > 0 {
			r.Operations = append(r.Operations, summarizeOperation(op, calls))
		}
	}
	if r.Lists == nil {
		r.Lists = []List{}
	}
	if r.Workload.MostExited == nil {
		r.Workload.MostExited = []PodCount{}
	}
	r.Inspection.SlowestOperation, r.Inspection.SlowestOperationShare = slowestOperation(r.Operations, r.pods)
	r.Inspection.SlowestPods = slowestPods(r.pods)
	r.Inspection.SlowestContainers = slowestContainers(r.pods)
	r.Projection = d.project()
}

func summarizeOperation(op string, calls []call) Operation {
	o := Operation{Name: op, Calls: len(calls)}
	took := make([]time.Duration, 0, len(calls))
	for _, c := range calls {
		took = append(took, c.took)
		switch {
		case c.hung:
			o.Timeouts++
		case c.err != nil:
			o.Errors++
		}
	}
	slices.Sort(took)
	o.MinSeconds = seconds(took[0])
	o.P50Seconds = seconds(quantile(took, 0.50))
	o.P90Seconds = seconds(quantile(took, 0.90))
	o.P99Seconds = seconds(quantile(took, 0.99))
	o.MaxSeconds = seconds(took[len(took)-1])
	return o
}

// slowestOperation names the inspection's operation with the highest p99
// and the share of the inspection's time its calls took.
func slowestOperation(ops []Operation, pods []*podResult) (string, float64) {
	var slowest *Operation
	for i, o := range ops {
		switch o.Name {
		case opListPodSandboxByPod, runtime.OpPodSandboxStatus, opListContainersByPod, runtime.OpContainerStatus:
			if slowest == nil || o.P99Seconds > slowest.P99Seconds {
				slowest = &ops[i]
			}
		}
	}
	if slowest == nil {
		return "", 0
	}
	var total, its time.Duration
	for _, p := range pods {
		for _, c := range p.calls {
			total += c.took
			if c.op == slowest.Name {
				its += c.took
			}
		}
	}
	if total == 0 {
		return slowest.Name, 0
	}
	return slowest.Name, float64(its) / float64(total)
}

// quantile is the nearest-rank q-quantile of sorted durations: a time one
// of the calls really took.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// p50 is the median of the calls of op that succeeded; 0 without one.
func (d *diagnosis) p50(op string) time.Duration {
	var took []time.Duration
	for _, c := range d.calls[op] {
		if c.err == nil {
			took = append(took, c.took)
		}
	}
	slices.Sort(took)
	return quantile(took, 0.5)
}

// byCost orders pod results slowest first, then by name.
func byCost(a, b *podResult) int {
	return cmp.Or(cmp.Compare(b.measured(), a.measured()), comparePods(a.pod, b.pod))
}

func slowestPods(pods []*podResult) []PodTiming {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, byCost)
	out := []PodTiming{}
	for _, p := range sorted[:min(len(sorted), slowestShown)] {
		out = append(out, podTiming(p))
	}
	return out
}

func podTiming(p *podResult) PodTiming {
	s := p.slowest()
	t := PodTiming{
		Pod:              p.pod,
		Calls:            len(p.calls),
		Seconds:          seconds(p.measured()),
		SlowestOperation: s.op,
		SlowestSeconds:   seconds(s.took),
		Hung:             p.hung(),
	}
	if s.op == runtime.OpContainerStatus {
		t.SlowestContainer = s.target
	}
	for _, c := range p.calls {
		if c.err != nil && t.Error == "" {
			t.Error = c.op + ": " + c.describe()
		}
	}
	return t
}

func slowestContainers(pods []*podResult) []ContainerTiming {
	var all []ContainerTiming
	for _, p := range pods {
		for _, c := range p.calls {
			if c.op == runtime.OpContainerStatus {
				all = append(
					all,
					ContainerTiming{Pod: p.pod, ID: c.id, Name: c.target, Seconds: seconds(c.took), Hung: c.hung, Error: c.describe()},
				)
			}
		}
	}
	slices.SortFunc(all, func(a, b ContainerTiming) int {
		return cmp.Or(
			cmp.Compare(b.Seconds, a.Seconds),
			comparePods(a.Pod, b.Pod),
			cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.ID, b.ID),
		)
	})
	return append([]ContainerTiming{}, all[:min(len(all), slowestShown)]...)
}

// project estimates the relist of the kubelet and of pleg from the calls.
func (d *diagnosis) project() Projection {
	o := d.opts
	p := Projection{
		PeriodSeconds:    seconds(o.RelistPeriod),
		ThresholdSeconds: seconds(o.RelistThreshold),
		AlertSeconds:     seconds(AlertThreshold),
		Pods:             d.rep.Workload.Pods,
		PlegConcurrency:  o.PlegConcurrency,

		RuntimeRequestTimeoutSeconds: seconds(o.RuntimeRequestTimeout),
		PlegInspectTimeoutSeconds:    seconds(o.PlegInspectTimeout),
	}
	lists := d.p50(runtime.OpListPodSandbox) + d.p50(runtime.OpListContainers)
	var (
		steady, kubelet, pleg, plegMax time.Duration
	)
	for _, r := range d.rep.pods {
		cost := r.kubeletCost(o.RuntimeRequestTimeout)
		kubelet += cost
		if r.failed() {
			steady += cost
		}
		pc := r.plegCost(o.PlegInspectTimeout)
		pleg += pc
		plegMax = max(plegMax, pc)
	}
	// Pods not inspected cost what the inspected ones did on average.
	if n := len(d.rep.pods); n > 0 && n < p.Pods {
		p.Extrapolated = true
		scale := func(t time.Duration) time.Duration {
			return time.Duration(float64(t) * float64(p.Pods) / float64(n))
		}
		kubelet, pleg = scale(kubelet), scale(pleg)
	}
	p.SteadySeconds = seconds(lists + steady)
	p.KubeletWorstSeconds = seconds(lists + kubelet)
	p.PlegWorstSeconds = seconds(lists + max(plegMax, pleg/time.Duration(max(o.PlegConcurrency, 1))))
	return p
}
