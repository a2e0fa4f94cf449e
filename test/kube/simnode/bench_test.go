// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package simnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// benchEnv gates BenchmarkKubeletRelist: it takes minutes and most of
// a machine, so it runs only when asked (make kubelet-on-sim).
const benchEnv = "PLEG_KUBELET_ON_SIM"

// relistMetric is the relist histogram, the kubelet's and pleg's alike.
const relistMetric = "kubelet_pleg_relist_duration_seconds"

// BenchmarkKubeletRelist grows one kubelet on the simulator, with the
// seed node's latencies, to each size in turn (PLEG_KUBELET_ON_SIM_SIZES,
// default 100,500,1000 pods of one container), pleg's generator beside
// it on the same runtime, and reports for each: the time until every pod
// ran, the kubelet's and pleg's relist p50 and p99 while the pods
// started (ramp) and over a steady minute after (steady), and whether the
// kubelet said "PLEG is not healthy". Run it once: -benchtime=1x.
func BenchmarkKubeletRelist(b *testing.B) {
	if os.Getenv(benchEnv) == "" {
		b.Skipf("set %s=1 to run the kubelet on the simulator (minutes; make kubelet-on-sim)", benchEnv)
	}
	sizes := []int{100, 500, 1000}
	if s := os.Getenv(benchEnv + "_SIZES"); s != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v <= 0 {
				b.Fatalf("%s_SIZES=%q: want positive pod counts separated by commas", benchEnv, s)
			}
			sizes = append(sizes, v)
		}
	}
	steady := time.Minute
	if s := os.Getenv(benchEnv + "_STEADY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("%s_STEADY=%q: %v", benchEnv, s, err)
		}
		steady = d
	}
	port, err := freePort()
	if err != nil {
		b.Fatal(err)
	}
	n := startNode(b, sim.LatencySeedNode, kubetest.KubeletOptions{Verbosity: 1, ReadOnlyPort: port, MaxPods: slices.Max(sizes) + 10})
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	// Pods are created at the pace of a controller, not of a client's
	// default 5 a second.
	cfg := n.server.Config(kubetest.AdminToken)
	cfg.QPS, cfg.Burst = 100, 200
	if n.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		b.Fatal(err)
	}
	metricsURL := fmt.Sprintf("http://%s:%d/metrics", nodeIP, port)
	created := 0
	for _, size := range sizes {
		b.Run(fmt.Sprintf("pods=%d", size), func(b *testing.B) {
			for range b.N {
				k0, p0 := n.relists(b, metricsURL)
				start := time.Now()
				n.createPodsFrom(b, ctx, created, size)
				created = max(created, size)
				if err := kubetest.WaitFor(ctx, fmt.Sprintf("%d pods Running", size), func() (bool, error) {
					running, _, err := n.running(ctx)
					return running >= size, err
				}); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), "s-to-running")
				k1, p1 := n.relists(b, metricsURL)
				time.Sleep(steady) // the window measured, not a wait for a condition
				k2, p2 := n.relists(b, metricsURL)
				report := func(phase, who string, from, to *dto.Histogram) {
					h := sub(to, from)
					b.ReportMetric(float64(h.GetSampleCount()), phase+"-"+who+"-relists")
					b.ReportMetric(metrics.HistogramQuantile(h, 0.5)*1e3, phase+"-"+who+"-p50-ms")
					b.ReportMetric(metrics.HistogramQuantile(h, 0.99)*1e3, phase+"-"+who+"-p99-ms")
				}
				report("ramp", "kubelet", k0, k1)
				report("ramp", "pleg", p0, p1)
				report("steady", "kubelet", k1, k2)
				report("steady", "pleg", p1, p2)
				log, err := n.kubelet.Log()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(unhealthy(log)), "unhealthy-lines")
				nd, err := n.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range nd.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
						b.Logf("node not Ready at %d pods: %s", size, c.Message)
					}
				}
			}
		})
	}
}

// createPodsFrom creates work pods from..to-1 (the namespace too).
func (n *node) createPodsFrom(t testing.TB, ctx context.Context, from, to int) {
	t.Helper()
	n.createPods(t, ctx, 0)
	for i := from; i < to; i++ {
		if _, err := n.cs.CoreV1().Pods(work).Create(ctx, workPod(i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// relists reads the relist histograms: the kubelet's from its read-only
// port, pleg's from its registry.
func (n *node) relists(t testing.TB, url string) (kubelet, pleg *dto.Histogram) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	kubelet = histogram(families[relistMetric])
	if kubelet == nil {
		t.Fatalf("%s has no %s", url, relistMetric)
	}
	gathered, err := n.pleg.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gathered {
		if f.GetName() == relistMetric {
			pleg = histogram(f)
		}
	}
	if pleg == nil {
		t.Fatalf("pleg's registry has no %s", relistMetric)
	}
	return kubelet, pleg
}

func histogram(f *dto.MetricFamily) *dto.Histogram {
	if f == nil || len(f.GetMetric()) == 0 {
		return nil
	}
	return f.GetMetric()[0].GetHistogram()
}

// sub is the histogram of the observations made between from and to,
// two readings of one histogram.
func sub(to, from *dto.Histogram) *dto.Histogram {
	count := to.GetSampleCount() - from.GetSampleCount()
	sum := to.GetSampleSum() - from.GetSampleSum()
	h := &dto.Histogram{SampleCount: &count, SampleSum: &sum}
	for i, b := range to.GetBucket() {
		c := b.GetCumulativeCount()
		if i < len(from.GetBucket()) {
			c -= from.GetBucket()[i].GetCumulativeCount()
		}
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: b.UpperBound, CumulativeCount: &c})
	}
	return h
}

// freePort is a TCP port free on the node's address.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }() // held only to find a free port
	return l.Addr().(*net.TCPAddr).Port, nil
}

// unhealthy counts the kubelet's "PLEG is not healthy" lines but those of
// its start, before its first relist ("pleg has yet to be successful").
func unhealthy(log []byte) int {
	n := 0
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, "PLEG is not healthy") && !strings.Contains(line, "yet to be successful") {
			n++
		}
	}
	return n
}
