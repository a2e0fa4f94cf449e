// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/internal/testing/promtest"
)

// scrapeJob is the job Prometheus scrapes the fleet's daemons as; each
// target carries its node's name in the label node.
const scrapeJob = "pleg"

// scrapeSettings are how often Prometheus scrapes each daemon and how long
// it waits for one: the chart's PodMonitor's, so that the figures are
// those of a fleet the chart installed.
type scrapeSettings struct {
	interval, timeout time.Duration
}

// chartScrape reads podMonitor.interval and podMonitor.scrapeTimeout from
// the chart's values.
func chartScrape(t *testing.T) scrapeSettings {
	t.Helper()
	const values = "../../../charts/pleg/values.yaml"
	data, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		PodMonitor struct {
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"podMonitor"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", values, err)
	}
	interval, err1 := time.ParseDuration(v.PodMonitor.Interval)
	timeout, err2 := time.ParseDuration(v.PodMonitor.ScrapeTimeout)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: podMonitor.interval %q, scrapeTimeout %q: want durations", values, v.PodMonitor.Interval, v.PodMonitor.ScrapeTimeout)
	}
	return scrapeSettings{interval: interval, timeout: timeout}
}

// startPrometheus starts one Prometheus scraping every daemon of the fleet
// on its --metrics-listen, with the extra scrape metrics on (for
// scrape_body_size_bytes).
func startPrometheus(t *testing.T, bin promtest.Binaries, f *fleet, s scrapeSettings) *promtest.Server {
	t.Helper()
	var targets []promtest.StaticConfig
	for _, n := range f.nodes {
		targets = append(targets, promtest.StaticConfig{Targets: []string{n.metrics}, Labels: map[string]string{"node": n.name}})
	}
	p := promtest.StartT(t, bin, promtest.Config{
		ScrapeInterval: s.interval,
		ScrapeConfigs: []promtest.ScrapeConfig{{
			JobName:            scrapeJob,
			ScrapeInterval:     s.interval.String(),
			ScrapeTimeout:      s.timeout.String(),
			StaticConfigs:      targets,
			ExtraScrapeMetrics: true,
		}},
	})
	return p
}

// waitScraped waits until Prometheus has scraped every daemon once.
func waitScraped(t *testing.T, p *promtest.Server, f *fleet, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	err := promtest.Wait(ctx, "every daemon scraped", func(ctx context.Context) (bool, error) {
		ts, err := p.Targets(ctx)
		if err != nil {
			return false, err
		}
		up := 0
		for _, tg := range ts {
			if tg.Health == "up" {
				up++
			} else if tg.LastError != "" {
				return false, fmt.Errorf("%s: %s", tg.ScrapeURL, tg.LastError)
			}
		}
		return up == f.size, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// promSelf is Prometheus' own figures at one moment, from its /metrics.
type promSelf struct {
	at         time.Time
	appended   float64 // prometheus_tsdb_head_samples_appended_total, of every type
	headSeries float64 // prometheus_tsdb_head_series
	rss        float64 // process_resident_memory_bytes
	cpu        float64 // process_cpu_seconds_total
}

func readPromSelf(ctx context.Context, p *promtest.Server) (promSelf, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/metrics", nil)
	if err != nil {
		return promSelf{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return promSelf{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return promSelf{}, fmt.Errorf("prometheus /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return promSelf{}, fmt.Errorf("prometheus /metrics: %w", err)
	}
	// Each is a counter or a gauge: the other's value reads 0.
	sum := func(name string) float64 {
		var s float64
		for _, m := range families[name].GetMetric() {
			s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return s
	}
	return promSelf{
		at:         time.Now(),
		appended:   sum("prometheus_tsdb_head_samples_appended_total"),
		headSeries: sum("prometheus_tsdb_head_series"),
		rss:        sum("process_resident_memory_bytes"),
		cpu:        sum("process_cpu_seconds_total"),
	}, nil
}

// scrapes is what one Prometheus saw of the fleet over the stretch at
// rest, and what it cost Prometheus.
type scrapes struct {
	interval time.Duration
	// Per node: the samples and the uncompressed bytes of its largest
	// scrape (scrape_samples_scraped, scrape_body_size_bytes), its mean
	// scrape duration, the bytes of one scrape as gzip sends them, and its
	// mean time between relists (kubelet_pleg_relist_interval_seconds).
	samples, bodyBytes, duration, gzipBytes, relistInterval []float64
	// Prometheus' own: samples appended a second over the stretch, series
	// in its head, resident memory and CPU (share of one core).
	appendedPerSecond, headSeries, rss, cpu float64
}

// measureScrapes reads the stretch at rest that from and to bound from
// Prometheus: its queries over the stretch (widened by two scrape
// intervals, so that each target has two scrapes in it even if one
// failed), its own counters read at either end, and one scrape of each
// daemon with gzip.
func measureScrapes(ctx context.Context, p *promtest.Server, f *fleet, s scrapeSettings, from, to promSelf) (scrapes, error) {
	r := scrapes{interval: s.interval}
	window := model.Duration(to.at.Sub(from.at) + 2*s.interval).String()
	queries := []struct {
		expr string
		into *[]float64
	}{
		{fmt.Sprintf(`max_over_time(scrape_samples_scraped{job=%q}[%s])`, scrapeJob, window), &r.samples},
		{fmt.Sprintf(`max_over_time(scrape_body_size_bytes{job=%q}[%s])`, scrapeJob, window), &r.bodyBytes},
		{fmt.Sprintf(`avg_over_time(scrape_duration_seconds{job=%q}[%s])`, scrapeJob, window), &r.duration},
		{fmt.Sprintf(`rate(kubelet_pleg_relist_interval_seconds_sum{job=%q}[%[2]s])`+
			` / rate(kubelet_pleg_relist_interval_seconds_count{job=%[1]q}[%[2]s])`, scrapeJob, window), &r.relistInterval},
	}
	for _, q := range queries {
		byNode, err := perNode(ctx, p, q.expr, f)
		if err != nil {
			return r, err
		}
		*q.into = byNode
	}
	for _, n := range f.nodes {
		b, err := gzipSize(ctx, n.metrics)
		if err != nil {
			return r, fmt.Errorf("%s: %w", n.name, err)
		}
		r.gzipBytes = append(r.gzipBytes, float64(b))
	}
	d := to.at.Sub(from.at).Seconds()
	r.appendedPerSecond = (to.appended - from.appended) / d
	r.cpu = (to.cpu - from.cpu) / d
	r.headSeries, r.rss = to.headSeries, to.rss
	return r, nil
}

// perNode evaluates expr, which gives one sample a node, and returns them
// in the fleet's order; a node without a sample is an error.
func perNode(ctx context.Context, p *promtest.Server, expr string, f *fleet) ([]float64, error) {
	v, err := p.Query(ctx, expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	byName := map[string]float64{}
	for _, smp := range v {
		byName[string(smp.Metric["node"])] = float64(smp.Value)
	}
	var out []float64
	var missing []string
	for _, n := range f.nodes {
		x, ok := byName[n.name]
		if !ok {
			missing = append(missing, n.name)
		}
		out = append(out, x)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: no sample of %d nodes: %s", expr, len(missing), strings.Join(missing[:min(5, len(missing))], ", "))
	}
	return out, nil
}

// gzipSize is the bytes of one scrape of the daemon at addr as they cross
// the network to a Prometheus, which asks for gzip.
func gzipSize(ctx context.Context, addr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	// Asked for explicitly, the answer is left compressed.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return 0, fmt.Errorf("/metrics answered %q, not gzip", resp.Header.Get("Content-Encoding"))
	}
	// The answer must be gzip indeed.
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return 0, err
	}
	return len(raw), nil
}

// fallingBehind lists the nodes whose daemon relisted, on average, less
// often than every twice its period: the machine does not keep up with
// the fleet, and its figures would understate what a node costs.
func fallingBehind(f *fleet, intervals []float64, period time.Duration) []string {
	var behind []string
	for i, iv := range intervals {
		if iv > 2*period.Seconds() {
			behind = append(behind, fmt.Sprintf("%s every %.2fs", f.nodes[i].name, iv))
		}
	}
	slices.Sort(behind)
	return behind
}

// loadAverage is the machine's load average over the last minute, from
// /proc/loadavg: the fleet shares the machine with whatever else runs.
func loadAverage() (string, error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "", fmt.Errorf("/proc/loadavg: %q", data)
	}
	return strings.Join(f[:3], " "), nil
}
