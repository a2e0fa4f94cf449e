package kube

import (
	"context"
	"flag"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

var outage = flag.Duration("outage", 15*time.Second,
	"how long TestAPIServerOutage keeps the API server stopped, and the length of its baseline window (docs/kubernetes.md's figures: -outage=1m)")

// window is what the daemon did in a stretch of time.
type window struct {
	relists               uint64
	durP50, durP99        time.Duration
	intervalP50, intP99   time.Duration
	events                int64
	healthzOK, healthzAll int
	length                time.Duration
}

// measure watches the daemon for d: its relists (from its own metrics),
// the events its subscriber got, and /healthz every half second.
func measure(t *testing.T, reg prometheus.Gatherer, healthz string, events *atomic.Int64, d time.Duration) window {
	t.Helper()
	before := histograms(t, reg)
	n0 := events.Load()
	start := time.Now()
	var w window
	for time.Since(start) < d {
		resp, err := http.Get(healthz)
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				w.healthzOK++
			}
			resp.Body.Close()
		}
		w.healthzAll++
		time.Sleep(500 * time.Millisecond)
	}
	w.length = time.Since(start)
	w.events = events.Load() - n0
	after := histograms(t, reg)
	dur := delta(after["kubelet_pleg_relist_duration_seconds"], before["kubelet_pleg_relist_duration_seconds"])
	interval := delta(after["kubelet_pleg_relist_interval_seconds"], before["kubelet_pleg_relist_interval_seconds"])
	w.relists = dur.GetSampleCount()
	w.durP50, w.durP99 = seconds(metrics.HistogramQuantile(dur, 0.5)), seconds(metrics.HistogramQuantile(dur, 0.99))
	w.intervalP50, w.intP99 = seconds(metrics.HistogramQuantile(interval, 0.5)), seconds(metrics.HistogramQuantile(interval, 0.99))
	return w
}

func (w window) log(t *testing.T, name string) {
	t.Logf("%-22s %5.1fs: %4d relists, duration p50 %8v p99 %8v, interval p50 %8v p99 %8v; %5d events (%.1f/s); /healthz 200 %d of %d",
		name, w.length.Seconds(), w.relists, w.durP50, w.durP99, w.intervalP50, w.intP99,
		w.events, float64(w.events)/w.length.Seconds(), w.healthzOK, w.healthzAll)
}

// TestAPIServerOutage stops the API server for -outage while the daemon
// relists a churning simulator, and checks that relisting, event delivery
// and /healthz go on as before; then a pod hangs before the API server is
// back, and its condition and event, written late, reach it. It first freezes the API server (SIGSTOP: connections open,
// nothing answered) for a while, the slow case. The figures of each window
// are logged (-v).
func TestAPIServerOutage(t *testing.T) {
	srv, cs := apiServer(t)
	const node = "node-outage"
	createNode(t, cs, node)
	kubeconfig, err := srv.WriteKubeconfig("admin", kubetest.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	// Containers crash and restart, at a steady rate: the events of every
	// window come from the same churn. Pods stay, the hung one too.
	churn, err := sim.ParseChurn("crash=3")
	if err != nil {
		t.Fatal(err)
	}
	latency, err := sim.LatencyPreset("seed-node")
	if err != nil {
		t.Fatal(err)
	}
	s := startSim(t, sim.Options{Pods: 30, Containers: 3, Churn: churn, Latency: latency})
	// Relisting alone, every second: the relist figures are the
	// daemon's whole work.
	d := runDaemon(t, s, kubeconfig, node, pleg.Options{Mode: pleg.ModeGeneric, InspectTimeout: 5 * time.Second})
	var delivered atomic.Int64
	sub := d.Gen.Subscribe()
	t.Cleanup(func() { sub.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			if _, err := sub.Next(ctx); err != nil {
				return
			}
			delivered.Add(1)
		}
	}()
	healthz := "http://" + d.Addr() + "/healthz"
	waitCondition(t, cs, node, corev1.ConditionFalse, kubereport.ReasonHealthy, time.Minute)

	baseline := measure(t, d.Registry, healthz, &delivered, *outage)
	baseline.log(t, "API server up")

	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozen := measure(t, d.Registry, healthz, &delivered, min(*outage, 15*time.Second))
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	frozen.log(t, "API server frozen")

	if err := srv.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	down := measure(t, d.Registry, healthz, &delivered, *outage)
	down.log(t, "API server stopped")

	// Then, the API server still down, a pod hangs: its condition and
	// event must wait, and get through once it is back. (Not earlier: a
	// hung pod makes every relist wait for its deadline, which would hide
	// what the outage does to relisting.)
	retried := reportsTotal(t, d.Registry)["retried"]
	hung := somePod(t, d)
	if err := s.SetFaults(sim.Faults{HangPod: hung.UID}); err != nil {
		t.Fatal(err)
	}
	d.Gen.RequestReinspect(hung.UID)
	eventually(t, "a write tried and failed while the API server is down", 2*time.Minute, func() bool {
		return reportsTotal(t, d.Registry)["retried"] > retried
	})

	startCtx, cancelStart := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancelStart()
	if err := srv.StartAPIServer(startCtx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("API server down for %v (stopped, then started and ready)", back.Sub(stopped).Round(time.Millisecond))
	_, toCondition := waitCondition(t, cs, node, corev1.ConditionTrue, kubereport.ReasonPodStatusHung, 2*time.Minute)
	toEvent := eventually(t, "the pod's event, written once the API server is back", 2*time.Minute, func() bool {
		return hasEvent(podEvents(t, cs, hung.Namespace, hung.Name, hung.UID), corev1.EventTypeWarning, kubereport.ReasonPodStatusHung) != nil
	}) + toCondition
	t.Logf("after the API server is back: condition in %v, event in %v", toCondition.Round(time.Millisecond), toEvent.Round(time.Millisecond))

	// The same window once it is back, the pod answering again: a second
	// reference, taken under the machine's load of the moment, against
	// which the outage's figures read.
	if err := s.SetFaults(sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, cs, node, corev1.ConditionFalse, kubereport.ReasonHealthy, 2*time.Minute)
	after := measure(t, d.Registry, healthz, &delivered, *outage)
	after.log(t, "API server up again")

	for _, w := range []struct {
		name string
		w    window
	}{{"frozen", frozen}, {"stopped", down}} {
		if w.w.relists == 0 || w.w.healthzOK != w.w.healthzAll {
			t.Errorf("API server %s: %d relists, /healthz 200 %d of %d: want relisting and health unchanged", w.name, w.w.relists, w.w.healthzOK, w.w.healthzAll)
		}
		if baseline.events > 0 && w.w.events == 0 {
			t.Errorf("API server %s: no event delivered to the subscriber", w.name)
		}
	}
	reports := reportsTotal(t, d.Registry)
	t.Logf("pleg_kube_reports_total %v", reports)
	if reports["retried"] == 0 || reports["written"] == 0 {
		t.Errorf("pleg_kube_reports_total %v: want the writes that failed while the API server was down counted as retried", reports)
	}
}

func histograms(t *testing.T, reg prometheus.Gatherer) map[string]*dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetType() == dto.MetricType_HISTOGRAM && len(mf.GetMetric()) == 1 {
			out[mf.GetName()] = mf.GetMetric()[0].GetHistogram()
		}
	}
	return out
}

// delta is the histogram of the observations between before and after.
func delta(after, before *dto.Histogram) *dto.Histogram {
	if after == nil {
		return &dto.Histogram{}
	}
	if before == nil {
		return after
	}
	count := after.GetSampleCount() - before.GetSampleCount()
	d := &dto.Histogram{SampleCount: &count}
	for i, b := range after.GetBucket() {
		c := b.GetCumulativeCount()
		if i < len(before.GetBucket()) {
			c -= before.GetBucket()[i].GetCumulativeCount()
		}
		d.Bucket = append(d.Bucket, &dto.Bucket{UpperBound: b.UpperBound, CumulativeCount: &c})
	}
	return d
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Microsecond)
}

// reportsTotal is pleg_kube_reports_total by result.
func reportsTotal(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "pleg_kube_reports_total" {
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
