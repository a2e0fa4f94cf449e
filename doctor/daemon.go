// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"

	apiclient "github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/metrics"
)

// daemonTimeout bounds each read of the daemon: its answers are quick,
// and a daemon that does not answer is a finding, not a wait.
const daemonTimeout = 5 * time.Second

// readDaemon reads a pleg daemon's health and relist metrics.
func readDaemon(ctx context.Context, c *apiclient.Client, clk clock.PassiveClock) *Daemon {
	d := &Daemon{URL: c.String()}
	ctx, cancel := context.WithTimeout(ctx, 2*daemonTimeout)
	defer cancel()
	h, err := c.Health(ctx)
	var status *apiclient.StatusError
	switch {
	case errors.As(err, &status) && (status.Code == http.StatusUnauthorized || status.Code == http.StatusForbidden):
		d.Error = "the daemon refused us: " + err.Error()
		return d
	case errors.As(err, &status):
		d.Error = fmt.Sprintf("/healthz answered %d, not a pleg daemon's health", status.Code)
		return d
	case err != nil:
		d.Error = "reading /healthz: " + err.Error()
		return d
	}
	d.Healthy, d.Health = h.OK, h.Message

	text, err := c.MetricsText(ctx)
	if err != nil {
		if errors.As(err, &status) {
			err = fmt.Errorf("status %d", status.Code)
		}
		d.Error = "reading /metrics: " + err.Error()
		return d
	}
	readMetrics(d, text, clk)
	return d
}

// DaemonOf is the daemon's part of a report, made by the daemon itself:
// its health, and its metrics as its registry gathers them. name says
// which daemon (its address, or "in process").
func DaemonOf(name string, healthy bool, health string, g prometheus.Gatherer, clk clock.PassiveClock) *Daemon {
	d := &Daemon{URL: name, Healthy: healthy, Health: health}
	mfs, err := g.Gather()
	if err != nil {
		d.Error = "gathering the metrics: " + err.Error()
		return d
	}
	families := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		families[mf.GetName()] = mf
	}
	fillMetrics(d, families, clk)
	return d
}

// readMetrics fills d from the text of the daemon's /metrics.
func readMetrics(d *Daemon, text []byte, clk clock.PassiveClock) {
	families, err := apiclient.ParseMetrics(text)
	if err != nil {
		d.Error = err.Error()
		return
	}
	fillMetrics(d, families, clk)
}

// fillMetrics fills d from the daemon's metric families.
func fillMetrics(d *Daemon, families map[string]*dto.MetricFamily, clk clock.PassiveClock) {
	now := float64(clk.Now().UnixNano()) / 1e9
	if h := firstHistogram(families["kubelet_pleg_relist_duration_seconds"]); h != nil {
		d.Relists = h.GetSampleCount()
		d.RelistP50Seconds = figure(metrics.HistogramQuantile(h, 0.5))
		d.RelistP99Seconds = figure(metrics.HistogramQuantile(h, 0.99))
	}
	if v, ok := firstValue(families["kubelet_pleg_last_seen_seconds"]); ok && v > 0 {
		d.LastSeenSecondsAgo = figure(now - v)
	}
	if v, ok := firstValue(families["pleg_relist_in_flight"]); ok && v > 0 {
		if started, ok := firstValue(families["pleg_relist_started_timestamp_seconds"]); ok && started > 0 {
			d.RelistRunningSeconds = figure(now - started)
		}
	}
	for _, m := range families["pleg_mode"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			d.Mode = label(m, "mode")
		}
	}
	for _, m := range families["pleg_pod_inspection_failures_total"].GetMetric() {
		if v := figure(m.GetCounter().GetValue()); v > 0 {
			if d.InspectionFailures == nil {
				d.InspectionFailures = make(map[string]float64)
			}
			d.InspectionFailures[label(m, "reason")] = v
		}
	}
	discarded, _ := firstValue(families["kubelet_pleg_discard_events"])
	d.DiscardedEvents = figure(discarded)
	if _, ok := families["kubelet_pleg_relist_duration_seconds"]; !ok {
		d.Error = "/metrics has no kubelet_pleg_relist_duration_seconds: not a pleg daemon"
	}
}

// figure is v as the report takes it: a count, a duration or an age,
// never negative, and 0 for what is not a number (NaN, an infinity),
// which a report in JSON could not hold.
func figure(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}

func firstHistogram(f *dto.MetricFamily) *dto.Histogram {
	for _, m := range f.GetMetric() {
		if h := m.GetHistogram(); h != nil {
			return h
		}
	}
	return nil
}

// firstValue is the value of a gauge, counter or untyped metric's first
// series.
func firstValue(f *dto.MetricFamily) (float64, bool) {
	for _, m := range f.GetMetric() {
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
