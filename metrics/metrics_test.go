// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestKubeletCompatibility pins what dashboards and alerts written for the
// kubelet rely on: names, types, help texts, labels and buckets.
func TestKubeletCompatibility(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPLEG(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.RelistDuration.Observe(0.02)
	m.RelistInterval.Observe(1.02)
	m.PodRelistDuration.Observe(0.001)
	m.DiscardEvents.Inc()
	m.LastSeen.Set(1.7e9)
	m.RunningPods.Set(3)
	m.SetRunningContainers(1, 2, 3, 4)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	for _, want := range []struct {
		name, help string
		typ        dto.MetricType
		buckets    []float64
	}{
		{"kubelet_pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG.", dto.MetricType_HISTOGRAM, prometheus.DefBuckets},
		{"kubelet_pleg_relist_interval_seconds", "Interval in seconds between relisting in PLEG.", dto.MetricType_HISTOGRAM, prometheus.DefBuckets},
		{"kubelet_pleg_discard_events", "The number of discard events in PLEG.", dto.MetricType_COUNTER, nil},
		{"kubelet_pleg_last_seen_seconds", "Timestamp in seconds when PLEG was last seen active.", dto.MetricType_GAUGE, nil},
		{"kubelet_running_pods", "Number of pods that have a running pod sandbox", dto.MetricType_GAUGE, nil},
		{"kubelet_running_containers", "Number of containers currently running", dto.MetricType_GAUGE, nil},
	} {
		f := byName[want.name]
		switch {
		case f == nil:
			t.Errorf("%s not exported", want.name)
			continue
		case f.GetHelp() != want.help:
			t.Errorf("%s help %q, want %q", want.name, f.GetHelp(), want.help)
		case f.GetType() != want.typ:
			t.Errorf("%s type %v, want %v", want.name, f.GetType(), want.typ)
		}
		if want.buckets != nil {
			var got []float64
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				got = append(got, b.GetUpperBound())
			}
			if !slices.Equal(got, want.buckets) {
				t.Errorf("%s buckets %v, want %v", want.name, got, want.buckets)
			}
		}
	}

	states := map[string]float64{}
	for _, metric := range byName["kubelet_running_containers"].GetMetric() {
		if l := metric.GetLabel(); len(l) != 1 || l[0].GetName() != "container_state" {
			t.Fatalf("kubelet_running_containers labels %v, want container_state only", l)
		}
		states[metric.GetLabel()[0].GetValue()] = metric.GetGauge().GetValue()
	}
	want := map[string]float64{"created": 1, "running": 2, "exited": 3, "unknown": 4}
	for s, n := range want {
		if states[s] != n {
			t.Errorf("kubelet_running_containers{container_state=%q} = %v, want %v", s, states[s], n)
		}
	}

	// Ours are prefixed pleg_.
	for name := range byName {
		if !strings.HasPrefix(name, "kubelet_") && !strings.HasPrefix(name, "pleg_") {
			t.Errorf("metric %s is neither kubelet's nor prefixed pleg_", name)
		}
	}
}

func TestStockAlertExpressionParsesOurSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPLEG(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.RelistDuration.Observe(12)
	// The mixin's recording rule reads the _bucket series by le.
	const want = `
# HELP kubelet_pleg_relist_duration_seconds Duration in seconds for relisting pods in PLEG.
# TYPE kubelet_pleg_relist_duration_seconds histogram
kubelet_pleg_relist_duration_seconds_bucket{le="0.005"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="0.01"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="0.025"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="0.05"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="0.1"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="0.25"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="0.5"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="1"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="2.5"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="5"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="10"} 0
kubelet_pleg_relist_duration_seconds_bucket{le="+Inf"} 1
kubelet_pleg_relist_duration_seconds_sum 12
kubelet_pleg_relist_duration_seconds_count 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_pleg_relist_duration_seconds"); err != nil {
		t.Error(err)
	}
}

func TestRegistration(t *testing.T) {
	if _, err := NewPLEG(nil); err != nil {
		t.Errorf("NewPLEG(nil) = %v, want unregistered collectors", err)
	}
	reg := prometheus.NewRegistry()
	if _, err := NewPLEG(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPLEG(reg); err == nil {
		t.Error("a second generator on one registry registered without error")
	}
}

func TestBuildInfoHasOneSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	bi, err := NewBuildInfo(reg, Build{Version: "v0.1.0", Revision: "abc", GoVersion: "go1.26.8"})
	if err != nil {
		t.Fatal(err)
	}
	want := func(runtime, runtimeVersion string) string {
		return `
# HELP pleg_build_info 1, labelled with pleg's version, revision and Go version, and the name and version of the runtime it watches (empty until the runtime answered its Version call).
# TYPE pleg_build_info gauge
pleg_build_info{goversion="go1.26.8",revision="abc",runtime="` + runtime + `",runtime_version="` + runtimeVersion + `",version="v0.1.0"} 1
`
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("", "")), "pleg_build_info"); err != nil {
		t.Errorf("before the runtime answered: %v", err)
	}
	b := bi.Current()
	b.RuntimeName, b.RuntimeVersion = "containerd", "v2.4.2"
	bi.Set(b)
	b.RuntimeVersion = "v2.4.3" // upgraded under pleg
	bi.Set(b)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("containerd", "v2.4.3")), "pleg_build_info"); err != nil {
		t.Errorf("after an upgrade of the runtime: %v", err)
	}
}

// pleg_relist_duration_seconds sees every observation of the kubelet's
// histogram, with buckets that go on past its 10 s up to 10 minutes, and
// a native histogram beside them.
func TestLongRelistDuration(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPLEG(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []float64{0.02, 45, 200, 900} {
		m.ObserveRelist(s)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var long, kubelet *dto.Histogram
	for _, f := range families {
		switch f.GetName() {
		case "pleg_relist_duration_seconds":
			long = f.GetMetric()[0].GetHistogram()
		case "kubelet_pleg_relist_duration_seconds":
			kubelet = f.GetMetric()[0].GetHistogram()
		}
	}
	if long == nil || kubelet == nil {
		t.Fatalf("pleg_relist_duration_seconds %v, kubelet_pleg_relist_duration_seconds %v", long, kubelet)
	}
	wantBounds := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180, 300, 600}
	var bounds []float64
	cum := map[float64]uint64{}
	for _, b := range long.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	if !slices.Equal(bounds, wantBounds) {
		t.Errorf("buckets %v, want %v", bounds, wantBounds)
	}
	for le, want := range map[float64]uint64{0.025: 1, 30: 1, 60: 2, 180: 2, 300: 3, 600: 3} {
		if cum[le] != want {
			t.Errorf("bucket le=%v holds %d, want %d", le, cum[le], want)
		}
	}
	if long.GetSampleCount() != 4 || kubelet.GetSampleCount() != 4 || long.GetSampleSum() != kubelet.GetSampleSum() {
		t.Errorf("counts %d and %d, sums %v and %v: want the same observations in both",
			long.GetSampleCount(), kubelet.GetSampleCount(), long.GetSampleSum(), kubelet.GetSampleSum())
	}
	if long.GetSchema() != 3 || len(long.GetPositiveSpan()) == 0 {
		t.Errorf("native histogram: schema %d, spans %v; want schema 3 (factor 1.1) with observations", long.GetSchema(),
			long.GetPositiveSpan())
	}
	if len(kubelet.GetPositiveSpan()) != 0 {
		t.Error("the kubelet's histogram must stay classic")
	}
}
