// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/plegkit/pleg/internal/testing/promtest"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// settings are the run's, from the environment: make fleet sets them.
type settings struct {
	sizes []int         // PLEG_FLEET_NODES, "10,50,100"; default 10
	rest  time.Duration // PLEG_FLEET_REST, the stretch at rest; default 30s
	mode  string        // PLEG_FLEET_MODE, pleg run --mode; default generic
	// PLEG_FLEET_RELIST, pleg run --relist-period; default 1s, pleg's and
	// the kubelet's.
	relist time.Duration
}

func readSettings(t *testing.T) settings {
	t.Helper()
	s := settings{sizes: []int{10}, rest: 30 * time.Second, mode: "generic", relist: time.Second}
	if v := os.Getenv("PLEG_FLEET_NODES"); v != "" {
		s.sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("PLEG_FLEET_NODES=%q: want sizes such as 10,50,100", v)
			}
			s.sizes = append(s.sizes, n)
		}
	}
	if v := os.Getenv("PLEG_FLEET_REST"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("PLEG_FLEET_REST=%q: want a duration of at least 10s", v)
		}
		s.rest = d
	}
	if v := os.Getenv("PLEG_FLEET_MODE"); v != "" {
		s.mode = v
	}
	if v := os.Getenv("PLEG_FLEET_RELIST"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("PLEG_FLEET_RELIST=%q: want a relist period such as 1s", v)
		}
		s.relist = d
	}
	return s
}

// The bound every node keeps, whatever the fleet's size: its requests
// pass one token bucket of kubereport.DefaultBurst at once and
// kubereport.DefaultQPS a second, so a node sends at most
// burst + qps × d requests in any d seconds.
//
// The API server counts a request when it is done, and the harness reads
// the counters about a second apart, each read taking its own time: two
// requests that left a node 2 s apart may be counted a little closer. The
// harness allows them boundSlack.
const boundSlack = 500 * time.Millisecond

// perNodeAllowed is how many requests one node may have counted in an
// interval of d.
func perNodeAllowed(d time.Duration) float64 {
	return math.Floor(kubereport.DefaultBurst + kubereport.DefaultQPS*(d+boundSlack).Seconds())
}

// eventedRelistPeriod is pleg run's --evented-relist-period, which the
// harness leaves at its default: in evented mode the daemons relist this
// often while the runtime's event stream drives.
const eventedRelistPeriod = 30 * time.Second

// relistPeriod is how often a daemon of the fleet relists.
func (s settings) relistPeriod() time.Duration {
	if s.mode == "evented" {
		return eventedRelistPeriod
	}
	return s.relist
}

// TestFleet runs a fleet of each size in turn, measures it, prints the
// table and checks the bound.
func TestFleet(t *testing.T) {
	cfg := readSettings(t)
	server := startAPIServer(t)
	prom := promtest.Require(t)
	scrape := chartScrape(t)
	cs, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	// The simulator's pods live in namespace sim: their events need it.
	_, err = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sim"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubeconfig, err := server.WriteKubeconfig("fleet", kubetest.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	bin := kubetest.BuildPleg(t, "../../..")

	hc, err := rest.HTTPClientFor(server.Config(kubetest.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	smp := newSampler(hc, server.URL())
	ctx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		smp.run(ctx, time.Second)
	}()
	t.Cleanup(func() {
		stopSampling()
		<-sampled
	})

	var results []result
	for _, size := range cfg.sizes {
		ok := t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) {
			opts := fleetOptions{
				size: size, mode: cfg.mode, relist: cfg.relist, kubeconfig: kubeconfig, bin: bin,
				prom: prom, scrape: scrape,
			}
			results = append(results, runFleet(t, cs, smp, opts, cfg))
		})
		if !ok {
			break
		}
		if t.Failed() {
			t.Logf("kube-apiserver log tail:\n%s", server.LogTail(30))
		}
	}
	table := summary(results)
	t.Log("\n" + table)
	if out := os.Getenv("PLEG_FLEET_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// result is what one fleet measured.
type result struct {
	size, pods int
	mode       string
	relist     time.Duration // how often each daemon relists
	rest       time.Duration

	atRest, incident, recovery, stop phase

	// Each daemon's CPU (share of one core) over the stretch at rest, and
	// its resident memory at its end; the same of the simulated runtimes.
	daemonCPU, daemonRSS   []float64
	runtimeCPU, runtimeRSS []float64
	// apiServerCPU is the API server's CPU (share of one core) at rest,
	// from its own process_cpu_seconds_total.
	apiServerCPU float64

	// scrapes is what the fleet's Prometheus saw at rest.
	scrapes scrapes
	// load is the machine's load average at the end of the stretch at
	// rest, as /proc/loadavg gives it.
	load string
}

// runFleet starts a fleet, waits until every node reports, then measures
// it at rest, while every runtime hangs, when they all recover, and as
// every daemon stops.
func runFleet(t *testing.T, cs kubernetes.Interface, smp *sampler, opts fleetOptions, cfg settings) result {
	ctx := t.Context()
	started := time.Now()
	f := startFleet(t, cs, opts)
	r := result{size: opts.size, mode: opts.mode, relist: cfg.relistPeriod(), rest: cfg.rest, pods: 20}
	allowed := func(d time.Duration) float64 { return float64(opts.size) * perNodeAllowed(d) }
	// Progress is waited on, never assumed: the deadlines bound it on a
	// busy machine, a minute a node at the least.
	within := 5*time.Minute + time.Duration(opts.size)*time.Second

	// Prometheus' first scrapes, spread over its interval, while the
	// nodes report.
	prom := startPrometheus(t, opts.prom, f, opts.scrape)
	waitNodes(t, cs, f, "every node reports healthy", within, healthy)
	waitScraped(t, prom, f, within)
	t.Logf("%d nodes reporting and scraped %v after the start", opts.size, time.Since(started).Round(time.Second))

	measureRest(t, smp, f, prom, opts.scrape, &r)

	// Every runtime hangs at once: the condition turns on (the runtime
	// does not answer) and the node gets an event.
	from := markT(t, ctx, smp)
	if err := f.signalRuntimes(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, cs, f, "every node's condition on", within, degraded)
	waitEvents(t, cs, f, kubereport.ReasonRuntimeUnreachable, within)
	r.incident = analyze("incident", smp.between(from, markT(t, ctx, smp, from)), allowed)

	// They all answer again at once.
	from = markT(t, ctx, smp)
	if err := f.signalRuntimes(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, cs, f, "every node's condition off again", within, healthy)
	waitEvents(t, cs, f, kubereport.ReasonRelistRecovered, within)
	r.recovery = analyze("recovery", smp.between(from, markT(t, ctx, smp, from)), allowed)

	// Every daemon stops at once, as when the DaemonSet is deleted: each
	// sets its condition to Unknown.
	from = markT(t, ctx, smp)
	f.stopDaemons(t)
	waitNodes(t, cs, f, "every node's condition Unknown", within, unknown)
	r.stop = analyze("stop", smp.between(from, markT(t, ctx, smp, from)), allowed)

	for _, p := range []phase{r.atRest, r.incident, r.recovery, r.stop} {
		t.Logf("%s: %v requests in %v: %s; peak %.1f/s (%v in the interval %v in)",
			p.name, p.requests, p.length.Round(time.Second), p.kinds(), p.peak, p.peakCount, p.peakAt.Round(time.Second))
		for _, e := range p.excess {
			t.Errorf("%d nodes, %s: %s", opts.size, p.name, e)
		}
	}
	return r
}

// measureRest measures the fleet for r.rest while nothing goes wrong:
// pleg's requests, each daemon's and runtime's CPU and memory, what
// Prometheus scraped and what that cost it. It fails the test if a daemon
// falls behind its relist period, as on a machine too small for the
// fleet.
func measureRest(t *testing.T, smp *sampler, f *fleet, prom *promtest.Server, scrape scrapeSettings, r *result) {
	t.Helper()
	ctx := t.Context()
	from := markT(t, ctx, smp)
	prom0 := readPromSelfT(t, prom)
	daemons0, runtimes0 := f.usage(t)
	time.Sleep(r.rest) // the measurement's length: nothing is waited on
	daemons1, runtimes1 := f.usage(t)
	prom1 := readPromSelfT(t, prom)
	to := markT(t, ctx, smp, from)
	load, err := loadAverage()
	if err != nil {
		t.Fatal(err)
	}
	r.load = load
	if r.scrapes, err = measureScrapes(ctx, prom, f, scrape, prom0, prom1); err != nil {
		t.Fatal(err)
	}
	if behind := fallingBehind(f, r.scrapes.relistInterval, r.relist); len(behind) > 0 {
		t.Errorf("%d of %d daemons fall behind their relist period %v at rest (load average %s), so the figures "+
			"understate a node's cost: run fewer nodes, PLEG_FLEET_MODE=evented or a longer PLEG_FLEET_RELIST: %s",
			len(behind), f.size, r.relist, load, strings.Join(behind[:min(5, len(behind))], "; "))
	}
	samples := smp.between(from, to)
	r.atRest = analyze("at rest", samples, func(d time.Duration) float64 { return float64(f.size) * perNodeAllowed(d) })
	for i := range daemons1 {
		r.daemonCPU = append(r.daemonCPU, share(daemons1[i].cpu-daemons0[i].cpu, r.atRest.length))
		r.daemonRSS = append(r.daemonRSS, float64(daemons1[i].rss))
		r.runtimeCPU = append(r.runtimeCPU, share(runtimes1[i].cpu-runtimes0[i].cpu, r.atRest.length))
		r.runtimeRSS = append(r.runtimeRSS, float64(runtimes1[i].rss))
	}
	r.apiServerCPU = apiServerCPU(samples)
}

func share(cpu, over time.Duration) float64 { return cpu.Seconds() / over.Seconds() }

func readPromSelfT(t *testing.T, p *promtest.Server) promSelf {
	t.Helper()
	s, err := readPromSelf(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// markT is a phase's edge: the first sample taken from now, and, when
// the phase starts at from, a few seconds after it, so that every phase
// holds a few of the sampler's seconds.
func markT(t *testing.T, ctx context.Context, smp *sampler, from ...time.Time) time.Time {
	t.Helper()
	var after time.Time
	if len(from) > 0 {
		after = from[0].Add(3 * time.Second)
	}
	at, err := smp.mark(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// apiServerCPU is the API server's CPU over samples, from its own
// process_cpu_seconds_total, which the sampler keeps as a request of its
// own kind.
func apiServerCPU(samples []sample) float64 {
	if len(samples) < 2 {
		return 0
	}
	first, last := samples[0], samples[len(samples)-1]
	return (last.cpu - first.cpu) / last.at.Sub(first.at).Seconds()
}

func healthy(c *corev1.NodeCondition) bool {
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == kubereport.ReasonHealthy
}

func degraded(c *corev1.NodeCondition) bool { return c != nil && c.Status == corev1.ConditionTrue }

func unknown(c *corev1.NodeCondition) bool {
	return c != nil && c.Status == corev1.ConditionUnknown && c.Reason == kubereport.ReasonStopped
}

// waitNodes waits until pleg's condition on every node of the fleet is
// as want says, listing the fleet's nodes once a second (a LIST, which
// the figures leave out); on a timeout it names the nodes not there yet.
func waitNodes(t *testing.T, cs kubernetes.Interface, f *fleet, what string, within time.Duration, want func(*corev1.NodeCondition) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	selector := metav1.ListOptions{LabelSelector: fleetLabel + "=" + strconv.Itoa(f.size)}
	for {
		list, err := cs.CoreV1().Nodes().List(context.Background(), selector)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, n := range list.Items {
			if !want(plegCondition(&n)) {
				missing = append(missing, fmt.Sprintf("%s (%+v)", n.Name, plegCondition(&n)))
			}
		}
		if len(list.Items) != f.size {
			t.Fatalf("%d nodes listed, want %d", len(list.Items), f.size)
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d nodes not after %v: %s", what, len(missing), within, strings.Join(missing[:min(5, len(missing))], "; "))
		}
		f.checkAlive(t)
		time.Sleep(time.Second)
	}
}

// waitEvents waits until every node of the fleet has an event of reason
// on it.
func waitEvents(t *testing.T, cs kubernetes.Interface, f *fleet, reason string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	opts := metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"reason": reason, "involvedObject.kind": "Node",
	}).String()}
	for {
		list, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		told := map[string]bool{}
		for _, e := range list.Items {
			told[e.InvolvedObject.Name] = true
		}
		var missing []string
		for _, n := range f.nodes {
			if !told[n.name] {
				missing = append(missing, n.name)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event after %v on %d nodes: %s", reason, within, len(missing), strings.Join(missing[:min(5, len(missing))], ", "))
		}
		f.checkAlive(t)
		time.Sleep(time.Second)
	}
}

// checkAlive fails the test at once if a daemon or a runtime exited.
func (f *fleet) checkAlive(t *testing.T) {
	t.Helper()
	for _, n := range f.nodes {
		for _, p := range []*process{n.pleg, n.sim} {
			if p.exited() && !p.stopping.Load() {
				t.Fatalf("%s exited: %v\n%s", p.name, p.err, p.logTail())
			}
		}
	}
}

func plegCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == kubereport.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
