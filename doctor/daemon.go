package doctor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/metrics"
)

// maxDaemonBody bounds what is read of the daemon's answers.
const maxDaemonBody = 16 << 20

// readDaemon reads a pleg daemon's health and relist metrics at base.
func readDaemon(ctx context.Context, client *http.Client, base string, clk clock.PassiveClock) *Daemon {
	d := &Daemon{URL: base}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.Error = fmt.Sprintf("%q is not an http:// or https:// URL", base)
		return d
	}
	get := func(path string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath(path).String(), nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Accept", "text/plain")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxDaemonBody))
		return resp.StatusCode, body, err
	}

	code, body, err := get("/healthz")
	if err != nil {
		d.Error = "reading /healthz: " + err.Error()
		return d
	}
	d.Healthy = code == http.StatusOK
	d.Health = strings.TrimSpace(string(body))
	if code != http.StatusOK && code != http.StatusInternalServerError {
		d.Error = fmt.Sprintf("/healthz answered %d, not a pleg daemon's health", code)
		return d
	}

	code, body, err = get("/metrics")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		d.Error = "reading /metrics: " + err.Error()
		return d
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		d.Error = "parsing /metrics: " + err.Error()
		return d
	}
	now := float64(clk.Now().UnixNano()) / 1e9
	if h := firstHistogram(families["kubelet_pleg_relist_duration_seconds"]); h != nil {
		d.Relists = h.GetSampleCount()
		d.RelistP50Seconds = metrics.HistogramQuantile(h, 0.5)
		d.RelistP99Seconds = metrics.HistogramQuantile(h, 0.99)
	}
	if v, ok := firstValue(families["kubelet_pleg_last_seen_seconds"]); ok && v > 0 {
		d.LastSeenSecondsAgo = max(now-v, 0)
	}
	if v, ok := firstValue(families["pleg_relist_in_flight"]); ok && v > 0 {
		if started, ok := firstValue(families["pleg_relist_started_timestamp_seconds"]); ok && started > 0 {
			d.RelistRunningSeconds = max(now-started, 0)
		}
	}
	for _, m := range families["pleg_mode"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			d.Mode = label(m, "mode")
		}
	}
	for _, m := range families["pleg_pod_inspection_failures_total"].GetMetric() {
		if v := m.GetCounter().GetValue(); v > 0 {
			if d.InspectionFailures == nil {
				d.InspectionFailures = make(map[string]float64)
			}
			d.InspectionFailures[label(m, "reason")] = v
		}
	}
	d.DiscardedEvents, _ = firstValue(families["kubelet_pleg_discard_events"])
	if _, ok := families["kubelet_pleg_relist_duration_seconds"]; !ok {
		d.Error = "/metrics has no kubelet_pleg_relist_duration_seconds: not a pleg daemon"
	}
	return d
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
