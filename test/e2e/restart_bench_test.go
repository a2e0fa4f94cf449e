package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/internal/runtimetest"
	"github.com/plegkit/pleg/runtime/cri"
)

// BenchmarkRestartLatency measures, on containerd, how long after the CRI
// call that caused it each event reaches a consumer, for containers that
// restart as a crash-looping pod's do: stop, remove the previous instance,
// create, start. Two daemons watch the one containerd side by side, one
// applying the events' payloads at once (payloads), one taking events as
// hints for relists of their pods alone (hints); each is read by a
// Subscribe() consumer (sub) and by a /v1/events client (api). From the
// return of StopContainer to ContainerDied, of RemoveContainer to
// ContainerRemoved, of StartContainer to ContainerStarted; negative when
// the event came before the call returned. dup counts events delivered
// twice, missing those that never came.
//
//	go test -run '^$' -bench RestartLatency -benchtime 1x ./test/e2e/
//
// PLEG_BENCH_RESTART_DURATION shortens or lengthens each run (30s).
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

// watched is a daemon and its two consumers.
type watched struct {
	name     string
	sub, api *arrivals
}

func watchDaemon(b *testing.B, ctx context.Context, in *runtimetest.Instance, name string, hintOnly bool) *watched {
	b.Helper()
	rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	d, err := daemon.New(daemon.Config{
		Runtime:   rt,
		Generator: pleg.Options{Mode: pleg.ModeEvented, HintOnly: hintOnly},
		Listen:    "127.0.0.1:0",
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	w := &watched{name: name, sub: &arrivals{at: map[arrivalKey]time.Time{}}, api: &arrivals{at: map[arrivalKey]time.Time{}}}
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
			w.sub.add(ev.ContainerID, string(ev.Type), time.Now())
		}
	})
	c, err := client.New("http://"+d.Addr(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() {
		_ = c.Follow(runCtx, client.FollowOptions{}, func(ev api.Event) error {
			w.api.add(ev.ContainerID, ev.Type, time.Now())
			return nil
		})
	})
	for deadline := time.Now().Add(time.Minute); !d.Gen.Status().Evented; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Fatalf("%s: the event stream never drove", name)
		}
	}
	return w
}

// restartLatency runs one measurement: pods×2 containers, restarts at rate
// for duration, then the latency of each event type at each consumer.
func restartLatency(b *testing.B, in *runtimetest.Instance, pods int, rate float64, duration time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	clearPods(b, in)
	type app struct {
		pod     runtimetest.PodSpec
		sandbox string
		id      string
		n       int
		mu      sync.Mutex
	}
	apps := make([]*app, pods)
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
		apps[i] = &app{pod: pod, sandbox: sb, id: id}
	}
	paths := []*watched{watchDaemon(b, ctx, in, "payloads", false), watchDaemon(b, ctx, in, "hints", true)}

	// The calls' returns, as keys the consumers must see.
	var mu sync.Mutex
	returned := map[arrivalKey]time.Time{}
	done := func(id, typ string) {
		mu.Lock()
		returned[arrivalKey{id, typ}] = time.Now()
		mu.Unlock()
	}
	restart := func(a *app) {
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
		a := apps[i%pods]
		wg.Go(func() { restart(a) })
	}
	tick.Stop()
	wg.Wait()

	// Everything expected arrives, or counts as missing after a while.
	settle := time.Now().Add(10 * time.Second)
	for _, w := range paths {
		for _, got := range []*arrivals{w.sub, w.api} {
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
	for _, w := range paths {
		for consumer, got := range map[string]*arrivals{"sub": w.sub, "api": w.api} {
			byType := map[string][]time.Duration{}
			missing := 0
			for k, at := range returned {
				arrived, ok := got.get(k)
				if !ok {
					missing++
					continue
				}
				byType[k.typ] = append(byType[k.typ], arrived.Sub(at))
			}
			for typ, short := range map[string]string{string(pleg.ContainerStarted): "started", string(pleg.ContainerDied): "died", string(pleg.ContainerRemoved): "removed"} {
				d := byType[typ]
				if len(d) == 0 {
					continue
				}
				slices.Sort(d)
				prefix := w.name + "-" + consumer + "-" + short
				b.ReportMetric(ms(d[len(d)/2]), prefix+"-p50-ms")
				b.ReportMetric(ms(d[(len(d)*99-1)/100]), prefix+"-p99-ms")
			}
			b.ReportMetric(float64(got.dups), w.name+"-"+consumer+"-dup")
			b.ReportMetric(float64(missing), w.name+"-"+consumer+"-missing")
		}
	}
}
