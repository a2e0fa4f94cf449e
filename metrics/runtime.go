// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RuntimeOperations are the kubelet's metrics of calls to the container
// runtime, by operation_type (list_podsandbox, container_status, ...).
type RuntimeOperations struct {
	Total    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
	Errors   *prometheus.CounterVec
}

// NewRuntimeOperations creates the collectors and registers them on reg,
// unless reg is nil.
func NewRuntimeOperations(reg prometheus.Registerer) (*RuntimeOperations, error) {
	m := &RuntimeOperations{
		Total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubelet_runtime_operations_duration_seconds",
			Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
			Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
		}, []string{"operation_type"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
	}
	if reg == nil {
		return m, nil
	}
	return m, errors.Join(reg.Register(m.Total), reg.Register(m.Duration), reg.Register(m.Errors))
}

// Observe records one call of operation op that took d and returned err.
func (m *RuntimeOperations) Observe(op string, d time.Duration, err error) {
	m.Total.WithLabelValues(op).Inc()
	m.Duration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.Errors.WithLabelValues(op).Inc()
	}
}
