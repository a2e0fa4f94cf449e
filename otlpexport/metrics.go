// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	exported   prometheus.Counter
	failed     *prometheus.CounterVec
	lost       *prometheus.CounterVec
	requests   prometheus.Counter
	bytes      prometheus.Counter
	lagEvents  prometheus.Gauge
	lagSeconds prometheus.Gauge
	cursor     prometheus.Gauge
	behind     prometheus.Gauge
}

// Reasons of pleg_export_records_failed_total.
const (
	failRetryable = "retryable"
	failPermanent = "permanent"
	failRejected  = "rejected"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		exported: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pleg_export_records_total",
			Help: "Events the collector accepted, as OTLP log records (loss records not counted).",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_export_records_failed_total",
			Help: "Records of failed exports, by reason: retryable (each attempt; sent again), permanent " +
				"(the batch is dropped, with a loss record) or rejected (a partial success's rejected records).",
		}, []string{"reason"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_export_records_lost_total",
			Help: "Events never exported, told by a loss record, by reason: retention (the journal dropped them " +
				"first), journal (the journal lost them), rejected (the collector refused them for good).",
		}, []string{"reason"}),
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pleg_export_requests_total",
			Help: "Export requests sent to the collector, retries included.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pleg_export_bytes_total",
			Help: "Bytes of the requests the collector accepted, as protobuf before compression.",
		}),
		lagEvents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_export_lag_events",
			Help: "Events in the journal past the export cursor.",
		}),
		lagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_export_lag_seconds",
			Help: "Age of the oldest event not yet exported; 0 when caught up.",
		}),
		cursor: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_export_cursor",
			Help: "Sequence number of the last event the collector accepted.",
		}),
		behind: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_export_behind",
			Help: "1 while the exporter is behind the journal by more than its thresholds.",
		}),
	}
	for _, r := range []string{failRetryable, failPermanent, failRejected} {
		m.failed.WithLabelValues(r)
	}
	for _, r := range []string{LostRetention, LostJournal, LostRejected} {
		m.lost.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{
		m.exported, m.failed, m.lost, m.requests, m.bytes, m.lagEvents, m.lagSeconds, m.cursor, m.behind,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
