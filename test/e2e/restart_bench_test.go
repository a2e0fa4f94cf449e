// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime/cri"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkRestartLatency measures, on containerd, how long after the CRI
// call that caused it each event reaches a consumer, for containers that
// restart as a crash-looping pod's do: stop, remove the previous instance,
// create, start. Daemons watch the one containerd side by side, each read
// by a Subscribe() consumer (sub) and a /v1/events client (api): one
// applying the events' payloads at once (payloads), one taking events as
// hints for relists of their pods alone (hints). Beside them a bare client
// of the runtime's event stream (runtime-stream) gives the floor: when
// containerd's own events arrive. NAME-applied and NAME-fallback-REASON
// tell how each daemon that applies payloads took the events. From the
// return of StopContainer to ContainerDied, of RemoveContainer to
// ContainerRemoved, of StartContainer to ContainerStarted; negative when
// the event came before the call returned. NAME-over-stream-TYPE is how
// much later than the bare client's each event reached the consumer: what
// the daemon adds to what containerd takes, on the same machine at the
// same moment. NAME-sub-inside-TYPE is how long after Event.Observed each
// event reached the subscriber: for an event its payload told, from the
// moment the daemon read it off its stream to the subscriber's receipt. dup counts events delivered twice, missing those that
// never came.
//
//	go test -run '^$' -bench RestartLatency -benchtime 1x ./test/e2e/
//
// PLEG_BENCH_RESTART_DURATION shortens or lengthens each run (30s).
// PLEG_BENCH_RESTART_PATHS chooses the daemons, comma-separated (default
// "payloads,hints"): also "head", `pleg run --mode evented` built from this
// tree, in a process of its own and read by a /v1/events client alone,
// and "base", the same of the pleg binary PLEG_BENCH_BASE_PLEG names (built
// from another commit): the two compare commits side by side in one run;
// "journal", payloads with the journal in a state directory, the store's
// cost side by side with payloads in memory; "head-nostate", head with
// its journal in memory (head keeps it in a state directory, as on a
// node); "stream2", a second bare client of the stream (runtime2), whose
// over-stream figures are how far apart containerd's events reach two
// subscribers, a floor for what any daemon adds.
func BenchmarkRestartLatency(b *testing.B) {
	in := benchContainerd(b)
	clearPods(b, in)
	b.Cleanup(func() { clearPods(b, in) })
	duration := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PLEG_BENCH_RESTART_DURATION")); err == nil {
		duration = d
	}
	for _, load := range []struct {
		pods int
		rate float64 // restarts a second
	}{{20, 1}, {100, 5}} {
		b.Run(fmt.Sprintf("pods=%d/restarts=%v", load.pods, load.rate), func(b *testing.B) {
			for b.Loop() {
				restartLatency(b, in, load.pods, load.rate, duration)
			}
		})
	}
}

// arrivals records when events reach one consumer.
type arrivals struct {
	mu   sync.Mutex
	at   map[arrivalKey]time.Time
	dups int
}

type arrivalKey struct {
	id  string
	typ string
}

func (a *arrivals) add(id, typ string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := arrivalKey{id, typ}
	if _, ok := a.at[k]; ok {
		a.dups++
		return
	}
	a.at[k] = at
}

func (a *arrivals) get(k arrivalKey) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[k]
	return t, ok
}

// watched is a source of events and its consumers: a daemon read by a
// subscriber (sub) and a /v1/events client (api), or the runtime's own
// event stream read raw (stream), the floor any client of it can reach.
type watched struct {
	name      string
	consumers map[string]*arrivals
	reg       prometheus.Gatherer // a daemon's
	gen       *pleg.Generator     // a daemon's

	// inside holds, by type, how long after Event.Observed each event
	// reached the in-process subscriber: for an event told from its
	// payload, from the moment the daemon read it off the stream.
	mu     sync.Mutex
	inside map[string][]time.Duration
}

func newArrivals() *arrivals { return &arrivals{at: map[arrivalKey]time.Time{}} }

// watchRuntimeStream reads the runtime's event stream with a bare client, as the
// daemons' CRI adapter does, and records when each container event comes.
func watchRuntimeStream(b *testing.B, in *runtimetest.Instance) *watched {
	b.Helper()
	w := &watched{name: "runtime", consumers: map[string]*arrivals{"stream": newArrivals()}}
	ctx, stop := context.WithCancel(context.Background())
	stream, err := in.Runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		stop()
		b.Fatal(err)
	}
	types := map[runtimeapi.ContainerEventType]pleg.EventType{
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT: pleg.ContainerStarted,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT: pleg.ContainerDied,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT: pleg.ContainerRemoved,
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
				w.consumers["stream"].add(ev.GetContainerId(), string(typ), time.Now())
			}
		}
	})
	return w
}

// counted sums the samples of the daemon's counter name whose label
// matches, or all of them when label is empty: what the run's events took.
func (w *watched) counted(b *testing.B, name, label, value string) float64 {
	b.Helper()
	families, err := w.reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if label == "" || (l.GetName() == label && l.GetValue() == value) {
					sum += m.GetCounter().GetValue()
					break
				}
			}
			if len(m.GetLabel()) == 0 {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func watchDaemon(b *testing.B, ctx context.Context, in *runtimetest.Instance, name string, hintOnly bool, stateDir string) *watched {
	b.Helper()
	w := &watched{name: name, consumers: map[string]*arrivals{"sub": newArrivals(), "api": newArrivals()},
		inside: map[string][]time.Duration{}}
	d := runDaemon(b, ctx, in, pleg.Options{Mode: pleg.ModeEvented, HintOnly: hintOnly}, stateDir,
		func(ev pleg.Event, now time.Time) {
			w.consumers["sub"].add(ev.ContainerID, string(ev.Type), now)
			w.mu.Lock()
			w.inside[string(ev.Type)] = append(w.inside[string(ev.Type)], now.Sub(ev.Observed))
			w.mu.Unlock()
		},
		func(ev api.Event, now time.Time) { w.consumers["api"].add(ev.ContainerID, ev.Type, now) })
	w.reg, w.gen = d.Registry, d.Gen
	return w
}

// runDaemon runs the daemon as shipped over the instance, in evented mode
// with opts, its journal in stateDir, until the benchmark ends: a
// Subscribe() consumer and a /v1/events client are told each event as it
// reaches them. It returns once the event stream drives.
func runDaemon(b *testing.B, ctx context.Context, in *runtimetest.Instance, opts pleg.Options, stateDir string,
	onSub func(pleg.Event, time.Time), onAPI func(api.Event, time.Time)) *daemon.Daemon {
	b.Helper()
	rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	d, err := daemon.New(daemon.Config{
		Runtime:   rt,
		Generator: opts,
		StateDir:  stateDir,
		Listen:    "127.0.0.1:0",
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	sub := d.Gen.Subscribe()
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(context.Background())
	b.Cleanup(func() {
		stop()
		wg.Wait()
		sub.Close()
	})
	wg.Go(func() {
		if err := d.Run(runCtx); err != nil {
			b.Error(err)
		}
	})
	wg.Go(func() {
		for {
			ev, err := sub.Next(runCtx)
			if err != nil {
				return
			}
			onSub(ev, time.Now())
		}
	})
	c, err := client.New("http://"+d.Addr(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() {
		_ = c.Follow(runCtx, client.FollowOptions{}, func(ev api.Event) error {
			onAPI(ev, time.Now())
			return nil
		})
	})
	for deadline := time.Now().Add(time.Minute); !d.Gen.Status().Evented; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Fatal("the event stream never drove")
		}
	}
	return d
}

// restartLatency runs one measurement: pods×2 containers, restarts at rate
// for duration, then the latency of each event type at each consumer.
func restartLatency(b *testing.B, in *runtimetest.Instance, pods int, rate float64, duration time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	apps := startRestartApps(b, in, pods)
	paths := []*watched{watchRuntimeStream(b, in)}
	for _, name := range restartPaths(b) {
		switch name {
		case "payloads", "hints":
			paths = append(paths, watchDaemon(b, ctx, in, name, name == "hints", ""))
		case "journal":
			paths = append(paths, watchDaemon(b, ctx, in, name, false, b.TempDir()))
		case "head", "head-nostate":
			bin, err := plegBinary()
			if err != nil {
				b.Fatal(err)
			}
			state := b.TempDir()
			if name == "head-nostate" {
				state = ""
			}
			paths = append(paths, watchBinary(b, in, name, bin, "--state-dir", state))
		case "base":
			paths = append(paths, watchBinary(b, in, name, os.Getenv("PLEG_BENCH_BASE_PLEG")))
		case "stream2":
			// A second bare client: how far apart containerd's own
			// events reach two subscribers.
			w := watchRuntimeStream(b, in)
			w.name = "runtime2"
			paths = append(paths, w)
		default:
			b.Fatalf("PLEG_BENCH_RESTART_PATHS: unknown daemon %q", name)
		}
	}

	returned := runRestarts(b, in, apps, rate, duration)

	// Everything expected arrives, or counts as missing after a while.
	settle := time.Now().Add(10 * time.Second)
	for _, w := range paths {
		for _, got := range w.consumers {
			for k := range returned {
				for {
					if _, ok := got.get(k); ok || time.Now().After(settle) {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
	}
	floor := paths[0].consumers["stream"]
	for _, w := range paths {
		for consumer, got := range w.consumers {
			byType, overStream := map[string][]time.Duration{}, map[string][]time.Duration{}
			missing := 0
			for k, at := range returned {
				arrived, ok := got.get(k)
				if !ok {
					missing++
					continue
				}
				byType[k.typ] = append(byType[k.typ], arrived.Sub(at))
				if streamed, ok := floor.get(k); ok && got != floor {
					overStream[k.typ] = append(overStream[k.typ], arrived.Sub(streamed))
				}
			}
			for typ, short := range map[string]string{string(pleg.ContainerStarted): "started", string(pleg.ContainerDied): "died", string(pleg.ContainerRemoved): "removed"} {
				reportQuantiles(b, w.name+"-"+consumer+"-"+short, byType[typ])
				reportQuantiles(b, w.name+"-"+consumer+"-over-stream-"+short, overStream[typ])
				if consumer == "sub" {
					w.mu.Lock()
					reportQuantiles(b, w.name+"-sub-inside-"+short, w.inside[typ])
					w.mu.Unlock()
				}
			}
			b.ReportMetric(float64(got.dups), w.name+"-"+consumer+"-dup")
			b.ReportMetric(float64(missing), w.name+"-"+consumer+"-missing")
		}
	}
	// How each daemon that applies payloads took the events: applied at
	// once, or as hints (for which reason), so that a slow figure says
	// which path it came by.
	for _, w := range paths {
		if w.reg == nil || w.name == "hints" {
			continue
		}
		b.ReportMetric(w.counted(b, "pleg_evented_payloads_applied_total", "", ""), w.name+"-applied")
		for _, reason := range []string{"replayed", "no_sandbox_status", "no_subject_status", "contradicts_event", "failing_pod", "hints_pending", "overtaken_by_relist"} {
			if n := w.counted(b, "pleg_evented_payload_fallbacks_total", "reason", reason); n > 0 {
				b.ReportMetric(n, w.name+"-fallback-"+reason)
			}
		}
	}
}

// reportQuantiles reports the p50 and p99 of d, if any, as NAME-p50-ms and
// NAME-p99-ms.
func reportQuantiles(b *testing.B, name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(ms(d[len(d)/2]), name+"-p50-ms")
	b.ReportMetric(ms(d[(len(d)*99-1)/100]), name+"-p99-ms")
}

// restartPaths are the daemons PLEG_BENCH_RESTART_PATHS names.
func restartPaths(b *testing.B) []string {
	v := os.Getenv("PLEG_BENCH_RESTART_PATHS")
	if v == "" {
		return []string{"payloads", "hints"}
	}
	var out []string
	for name := range strings.SplitSeq(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	if slices.Contains(out, "base") && os.Getenv("PLEG_BENCH_BASE_PLEG") == "" {
		b.Fatal("PLEG_BENCH_RESTART_PATHS has base: set PLEG_BENCH_BASE_PLEG to its pleg binary")
	}
	return out
}

// watchBinary runs bin (a pleg binary) as `pleg run --mode evented` in a
// process of its own, read by a /v1/events client over a unix socket.
func watchBinary(b *testing.B, in *runtimetest.Instance, name, bin string, args ...string) *watched {
	b.Helper()
	dir, err := os.MkdirTemp("", "pleg-bench-")
	if err != nil {
		b.Fatal(err)
	}
	addr := "unix://" + filepath.Join(dir, "pleg.sock")
	cmd := exec.Command(bin, append([]string{"run", "-r", in.Endpoint, "--mode", "evented", "--listen", addr}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		_ = os.RemoveAll(dir)
	})
	c, err := client.New(addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	w := &watched{name: name, consumers: map[string]*arrivals{"api": newArrivals()}, reg: metricsOf{c}}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() {
		stop()
		wg.Wait()
	})
	// Evented once pleg_mode says so; the events stream is read from then.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%s: the event stream never drove", name)
		}
		if drives(runCtx, c) {
			break
		}
	}
	wg.Go(func() {
		_ = c.Follow(runCtx, client.FollowOptions{}, func(ev api.Event) error {
			w.consumers["api"].add(ev.ContainerID, ev.Type, time.Now())
			return nil
		})
	})
	return w
}

// metricsOf gathers a daemon's metrics over its API.
type metricsOf struct{ c *client.Client }

func (m metricsOf) Gather() ([]*dto.MetricFamily, error) {
	families, err := m.c.Metrics(context.Background())
	return slices.Collect(maps.Values(families)), err
}

// restartApp is a pod whose app container restarts as a crash-looping
// pod's does.
type restartApp struct {
	pod     runtimetest.PodSpec
	sandbox string
	id      string
	n       int
	mu      sync.Mutex
}

// startRestartApps clears the runtime and starts pods pods of two
// containers, a sidecar and the app that restarts.
func startRestartApps(b *testing.B, in *runtimetest.Instance, pods int) []*restartApp {
	b.Helper()
	ctx := context.Background()
	clearPods(b, in)
	apps := make([]*restartApp, pods)
	for i := range pods {
		pod := runtimetest.PodSpec{UID: fmt.Sprintf("restart-%03d", i), Name: fmt.Sprintf("restart-%03d", i), Namespace: "bench"}
		sb, err := in.RunPod(ctx, pod)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: "sidecar", Args: sleeping}); err != nil {
			b.Fatal(err)
		}
		id, err := in.RunContainer(ctx, sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		if err != nil {
			b.Fatal(err)
		}
		apps[i] = &restartApp{pod: pod, sandbox: sb, id: id}
	}
	return apps
}

// runRestarts restarts the apps in turn, rate a second, for duration
// (stop, remove, create, start), and returns when each call that should
// yield an event returned, keyed as the consumers see the events.
func runRestarts(b *testing.B, in *runtimetest.Instance, apps []*restartApp, rate float64, duration time.Duration) map[arrivalKey]time.Time {
	b.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	returned := map[arrivalKey]time.Time{}
	done := func(id, typ string) {
		mu.Lock()
		returned[arrivalKey{id, typ}] = time.Now()
		mu.Unlock()
	}
	restart := func(a *restartApp) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if err := in.StopContainer(ctx, a.id, 0); err != nil {
			b.Error(err)
			return
		}
		done(a.id, string(pleg.ContainerDied))
		if err := in.RemoveContainer(ctx, a.id); err != nil {
			b.Error(err)
			return
		}
		done(a.id, string(pleg.ContainerRemoved))
		a.n++
		id, err := in.CreateContainer(ctx, a.sandbox, a.pod, runtimetest.ContainerSpec{Name: "app", Attempt: uint32(a.n), Args: sleeping})
		if err != nil {
			b.Error(err)
			return
		}
		if err := in.StartContainer(ctx, id); err != nil {
			b.Error(err)
			return
		}
		done(id, string(pleg.ContainerStarted))
		a.id = id
	}
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	end := time.Now().Add(duration)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		a := apps[i%len(apps)]
		wg.Go(func() { restart(a) })
	}
	tick.Stop()
	wg.Wait()
	return returned
}
