// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// conditionGauge is pleg_node_condition: 1, labelled with the status and
// reason of the condition pleg last wrote on its node (or found there,
// written before a restart, and left as it was). It has no series before
// the first, and one at a time: a fleet's nodes whose condition is on are
// `pleg_node_condition{status="True"}`, and why, `by (reason)`.
type conditionGauge struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	known  bool
	status corev1.ConditionStatus
	reason string
}

func newConditionGauge() *conditionGauge {
	return &conditionGauge{desc: prometheus.NewDesc("pleg_node_condition",
		"1, labelled with the status and reason of the "+string(ConditionType)+" node condition pleg last wrote to the "+
			"Kubernetes API (True: a problem, named by the reason).",
		[]string{"condition", "status", "reason"}, nil)}
}

// set records c as the condition on the node.
func (g *conditionGauge) set(c *corev1.NodeCondition) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known, g.status, g.reason = true, c.Status, c.Reason
}

// Describe implements prometheus.Collector.
func (g *conditionGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *conditionGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	known, status, reason := g.known, g.status, g.reason
	g.mu.Unlock()
	if known {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, 1, string(ConditionType), string(status), reason)
	}
}
