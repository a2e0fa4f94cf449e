// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// diedNS is the benchmark's namespace.
const diedNS = "died"

// BenchmarkDiedBesideTheKubelet puts pleg's ContainerDied and
// ContainerStarted latency beside the kubelet's own, in one run on one
// node: the cluster of startCluster, its kubelet with the EventedPLEG
// feature gate on (in 1.37 a fast path: a container's exit on the CRI
// event stream makes the kubelet relist that pod at once), and beside it
// on the host an in-process pleg daemon as shipped (evented, journal in a
// state directory) on the same containerd. A bare client of containerd's
// CRI event stream (GetContainerEvents) is the floor.
//
// The workload is crash-looping pods (their container exits 3 after a
// second, restartPolicy Always, so the kubelet's back-off spaces the
// restarts 10, 20, 40 s...), created a second apart. For each container,
// matched by its ID, the figures are over the bare client's arrival:
//
//   - kubelet: when the kubelet logged `SyncLoop (PLEG)` for the event
//     (the klog header, µs): the moment its sync loop takes it;
//   - pleg: when a /v1/events client read the event (not the event's own
//     time): the moment a consumer of pleg has it.
//
// Reported per type: p50 and p99 in ms of both, pleg's p99 over the
// kubelet's, how many the stream saw, and how many of those each side
// never told. evented-conns is the kubelet's own
// kubelet_evented_pleg_connection_success_count: 0 would mean its fast
// path never ran.
//
//	cd test/kube && CI=true go test -run '^$' -bench DiedBesideTheKubelet -benchtime 1x ./node/
//
// PLEG_BENCH_DIED_DURATION (90s) is how long the pods crash;
// PLEG_BENCH_DIED_PODS (12) how many there are; PLEG_BENCH_DIED_EVENTED=false
// runs the kubelet's generic PLEG alone (the gate's default). It needs
// root.
func BenchmarkDiedBesideTheKubelet(b *testing.B) {
	duration := 90 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PLEG_BENCH_DIED_DURATION")); err == nil && d > 0 {
		duration = d
	}
	pods := 12
	if n, err := strconv.Atoi(os.Getenv("PLEG_BENCH_DIED_PODS")); err == nil && n > 0 {
		pods = n
	}
	evented := os.Getenv("PLEG_BENCH_DIED_EVENTED") != "false"
	readOnly, err := freePort()
	if err != nil {
		b.Fatal(err)
	}
	c := startClusterWith(b, func(o *kubetest.KubeletOptions) {
		o.FeatureGates = map[string]bool{"EventedPLEG": evented}
		o.ReadOnlyPort = readOnly
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c.diedNamespace(b, ctx)
	for b.Loop() {
		b.StopTimer()
		stream := watchContainerEvents(b, c.runtime)
		fromPleg := watchPleg(b, c.runtime)
		var names []string
		for i := range pods {
			name := fmt.Sprintf("crash-%d-%d", time.Now().UnixNano(), i)
			p := testPod(name, corev1.RestartPolicyAlways, "crashloop", "3", "1s")
			if _, err := c.cs.CoreV1().Pods(diedNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			names = append(names, diedNS+"/"+name)
			time.Sleep(time.Second) // spreads the pods' deaths, not a wait
		}
		time.Sleep(duration) // the window the pods crash in, not a wait

		// Every event the stream told of the workload's containers, once
		// both sides have had the time to tell it too.
		var kubelet map[arrivalKey]time.Time
		settle := time.Now().Add(30 * time.Second)
		for {
			kubelet = c.kubeletArrivals(b, names)
			if time.Now().After(settle) || allTold(stream.snapshot(), kubelet, fromPleg.snapshot()) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		reportBeside(b, stream.snapshot(), kubelet, fromPleg.snapshot())
		if n, err := kubeletCounter(gateway, readOnly, "kubelet_evented_pleg_connection_success_count"); err != nil {
			b.Error(err)
		} else {
			b.ReportMetric(n, "evented-conns")
		}
		b.StartTimer()
	}
}

// arrivalKey is one event of one container.
type arrivalKey struct {
	id, typ string
}

// arrivals are when a consumer first had each event.
type arrivals struct {
	mu sync.Mutex
	at map[arrivalKey]time.Time
}

func (a *arrivals) add(id, typ string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := arrivalKey{id, typ}
	if _, ok := a.at[k]; !ok {
		a.at[k] = at
	}
}

func (a *arrivals) snapshot() map[arrivalKey]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[arrivalKey]time.Time, len(a.at))
	for k, v := range a.at {
		out[k] = v
	}
	return out
}

// watchContainerEvents is a bare client of the runtime's CRI event
// stream: when it received each container's start and stop.
func watchContainerEvents(b *testing.B, in *runtimetest.Instance) *arrivals {
	b.Helper()
	a := &arrivals{at: map[arrivalKey]time.Time{}}
	ctx, stop := context.WithCancel(context.Background())
	stream, err := in.Runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		stop()
		b.Fatal(err)
	}
	types := map[runtimeapi.ContainerEventType]pleg.EventType{
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT: pleg.ContainerStarted,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT: pleg.ContainerDied,
	}
	var wg sync.WaitGroup
	b.Cleanup(func() {
		stop()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			if typ, ok := types[ev.GetContainerEventType()]; ok {
				a.add(ev.GetContainerId(), string(typ), time.Now())
			}
		}
	})
	return a
}

// watchPleg runs the daemon as shipped on the host, evented, its journal
// in a state directory, and a /v1/events client of it: when that client
// read each event.
func watchPleg(b *testing.B, in *runtimetest.Instance) *arrivals {
	b.Helper()
	a := &arrivals{at: map[arrivalKey]time.Time{}}
	rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	d, err := daemon.New(daemon.Config{
		Runtime:   rt,
		Generator: pleg.Options{Mode: pleg.ModeEvented},
		StateDir:  b.TempDir(),
		Listen:    "127.0.0.1:0",
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(context.Background())
	b.Cleanup(func() {
		stop()
		wg.Wait()
	})
	wg.Go(func() {
		if err := d.Run(runCtx); err != nil {
			b.Error(err)
		}
	})
	cl, err := client.New("http://"+d.Addr(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() {
		_ = cl.Follow(runCtx, client.FollowOptions{}, func(ev api.Event) error {
			a.add(ev.ContainerID, ev.Type, time.Now())
			return nil
		})
	})
	for deadline := time.Now().Add(time.Minute); !d.Gen.Status().Evented; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("pleg's event stream never drove")
		}
	}
	return a
}

// diedNamespace makes the benchmark's namespace and waits for its default
// service account, which admission wants of every pod.
func (c *cluster) diedNamespace(b *testing.B, ctx context.Context) {
	b.Helper()
	if err := kubetest.EnsureNamespace(ctx, c.cs, diedNS); err != nil {
		b.Fatal(err)
	}
}

// kubeletArrivals are when the kubelet logged each Started and Died
// event of the pods names lists (namespace/name).
func (c *cluster) kubeletArrivals(b *testing.B, names []string) map[arrivalKey]time.Time {
	b.Helper()
	log, err := c.kubelet.Log()
	if err != nil {
		b.Fatal(err)
	}
	evs, err := kubetest.KubeletPLEGEvents(log)
	if err != nil {
		b.Fatal(err)
	}
	out := map[arrivalKey]time.Time{}
	for _, ev := range evs {
		if !slices.Contains(names, ev.Pod) || ev.At.IsZero() {
			continue
		}
		k := arrivalKey{ev.ID, ev.Type}
		if _, ok := out[k]; !ok {
			out[k] = ev.At
		}
	}
	return out
}

// allTold reports whether the kubelet and pleg told every event of the
// kubelet's containers that the stream told.
func allTold(stream, kubelet, fromPleg map[arrivalKey]time.Time) bool {
	ids := containerIDs(kubelet)
	for k := range stream {
		if !ids[k.id] {
			continue
		}
		if _, ok := kubelet[k]; !ok {
			return false
		}
		if _, ok := fromPleg[k]; !ok {
			return false
		}
	}
	return true
}

// containerIDs are the containers (not sandboxes) the kubelet told of:
// the workload's, which the stream's events are filtered by.
func containerIDs(kubelet map[arrivalKey]time.Time) map[string]bool {
	ids := map[string]bool{}
	for k := range kubelet {
		ids[k.id] = true
	}
	return ids
}

// reportBeside reports, per type, the kubelet's and pleg's delay over the
// stream, side by side.
func reportBeside(b *testing.B, stream, kubelet, fromPleg map[arrivalKey]time.Time) {
	b.Helper()
	ids := containerIDs(kubelet)
	for _, typ := range []struct{ name, metric string }{
		{string(pleg.ContainerDied), "died"},
		{string(pleg.ContainerStarted), "started"},
	} {
		var k, p []float64
		seen, kubeletMissing, plegMissing := 0, 0, 0
		for key, at := range stream {
			if key.typ != typ.name || !ids[key.id] {
				continue
			}
			seen++
			if t, ok := kubelet[key]; ok {
				k = append(k, ms(t.Sub(at)))
			} else {
				kubeletMissing++
			}
			if t, ok := fromPleg[key]; ok {
				p = append(p, ms(t.Sub(at)))
			} else {
				plegMissing++
			}
		}
		b.ReportMetric(float64(seen), typ.metric+"-n")
		b.ReportMetric(float64(kubeletMissing), typ.metric+"-kubelet-missing")
		b.ReportMetric(float64(plegMissing), typ.metric+"-pleg-missing")
		if len(k) == 0 || len(p) == 0 {
			b.Errorf("%s: the stream told %d of the kubelet's containers; the kubelet matched %d, pleg %d",
				typ.name, seen, len(k), len(p))
			continue
		}
		k50, k99, p50, p99 := percentile(k, 50), percentile(k, 99), percentile(p, 50), percentile(p, 99)
		b.ReportMetric(k50, typ.metric+"-kubelet-p50-ms")
		b.ReportMetric(k99, typ.metric+"-kubelet-p99-ms")
		b.ReportMetric(p50, typ.metric+"-pleg-p50-ms")
		b.ReportMetric(p99, typ.metric+"-pleg-p99-ms")
		if k99 > 0 {
			b.ReportMetric(p99/k99, typ.metric+"-p99-pleg/kubelet")
		}
		b.Logf("%s over the stream, %d of them: kubelet p50 %.1f p99 %.1f ms; pleg p50 %.1f p99 %.1f ms",
			typ.name, seen, k50, k99, p50, p99)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank percentile q of xs.
func percentile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// freePort is a TCP port free on this machine when asked.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// kubeletCounter reads a counter without labels from the kubelet's
// /metrics on its read-only port.
func kubeletCounter(host string, port int, name string) (float64, error) {
	resp, err := http.Get("http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("kubelet /metrics: no %s", name)
}
