// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	events, bytes, diskBytes, degraded prometheus.Gauge
	recoveries                         *prometheus.CounterVec
	commitDuration                     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_journal_entries",
			Help: "Events (and gaps) the journal holds for clients to resume from.",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_journal_bytes",
			Help: "Size of the events the journal holds, as encoded; bounded by --event-buffer-bytes.",
		}),
		diskBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_journal_disk_bytes",
			Help: "Size of the journal's segment files in the state directory.",
		}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pleg_journal_degraded",
			Help: "1 while the journal has a state directory but keeps events in memory only, because it cannot use the " +
				"directory; a restart then loses them.",
		}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_journal_recoveries_total",
			Help: "What the journal found in its state directory at start: new, clean, killed, crashed (readers told of a " +
				"gap), truncated (gap), corrupt or newer_version (store set aside, gap), other_runtime or unconfirmed_runtime " +
				"(a store of another runtime, or of one the runtime watched could not be confirmed to be, set aside " +
				"unreported, gap), unusable (in memory).",
		}, []string{"outcome"}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pleg_journal_commit_duration_seconds",
			Help:    "Time to write a change to the journal before its events are delivered.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 8),
		}),
	}
	for _, o := range []string{
		OutcomeNew, OutcomeClean, OutcomeKilled, OutcomeCrashed,
		OutcomeTruncated, OutcomeCorrupt, OutcomeNewer, OutcomeUnusable, OutcomeOtherRuntime, OutcomeUnconfirmedRuntime,
	} {
		m.recoveries.WithLabelValues(o)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.events, m.bytes, m.diskBytes, m.degraded, m.recoveries, m.commitDuration} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
