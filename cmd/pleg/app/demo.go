// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/metrics"
)

// demoLong is pleg demo's help.
const demoLong = `Demo starts a simulated runtime whose containers crash, exit and restart and
whose pods come and go, runs the daemon over it, and prints once a second the
pods it sees, the events it delivers per second by type, its relist duration
and its health, for --duration or until Ctrl-C. The daemon's API is served
meanwhile; the address is printed at the start.`

// demoFlags are pleg demo's settings, as its flags set them.
type demoFlags struct {
	duration time.Duration
	listen   string
	sim      simFlags
}

func newDemoCommand(g *global) *cobra.Command {
	var o demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the daemon over a simulated runtime with churn, and show what it does",
		Long:  demoLong,
		Args:  cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if o.duration < 0 {
				return fmt.Errorf("--duration %v: must be 0 (until Ctrl-C) or more", o.duration)
			}
			return o.sim.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), g) },
	}
	f := cmd.Flags()
	f.DurationVar(&o.duration, "duration", 0, "how long to run; 0 runs until Ctrl-C")
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "address of the API (port 0: any free port)")
	o.sim.register(f, "")
	return cmd
}

// run starts the simulated runtime and the daemon over it, and shows what
// the daemon does until the duration ends or a signal stops it.
func (o *demoFlags) run(ctx context.Context, g *global) error {
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	// The summary is the demo's output: logs only when they matter.
	if g.verbosity < 4 {
		g.log = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	rt, cleanup, err := g.watchedRuntime(ctx, true, o.sim, 2*time.Minute)
	if err != nil {
		return err
	}
	defer cleanup()
	d, err := daemon.New(daemon.Config{Runtime: rt, Generator: g.generatorOptions(), Listen: o.listen, Logger: g.log})
	if err != nil {
		return err
	}
	counts := &eventCounts{byType: map[pleg.EventType]int{}}
	sub := d.Gen.Subscribe()
	defer sub.Close()
	go counts.count(ctx, sub)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	url := "http://" + d.Addr()
	if strings.HasPrefix(d.Addr(), "unix://") {
		url = d.Addr()
	}
	g.printf("pleg demo: %d simulated pods x %d containers, churn %s, latency %s\n",
		o.sim.pods, o.sim.containers, o.sim.churn, o.sim.latency)
	g.printf("API on %s: try curl %s/healthz, %s/v1/pods, %s/v1/events\n\n", url, url, url, url)
	return showDemo(d, counts, done, newSummaryView(g.stdout))
}

// showDemo renders a summary once a second until the daemon stops, then
// the last one.
func showDemo(d *daemon.Daemon, counts *eventCounts, done <-chan error, show *summaryView) error {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var (
		prev map[pleg.EventType]int
		last summary
	)
	for {
		select {
		case err := <-done:
			s := demoSummary(d, counts, prev, time.Since(start), true)
			// Stopping closed the event stream: the mode line of the last
			// frame says how it ran.
			s.mode = cmp.Or(last.mode, s.mode)
			show.render(s)
			return err
		case <-tick.C:
			last = demoSummary(d, counts, prev, time.Since(start), false)
			prev = last.totals
			show.render(last)
		}
	}
}

// eventCounts counts the events a subscription delivers, by type.
type eventCounts struct {
	mu     sync.Mutex
	byType map[pleg.EventType]int
}

func (c *eventCounts) count(ctx context.Context, sub *pleg.Subscription) {
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return
		}
		c.mu.Lock()
		c.byType[ev.Type]++
		c.mu.Unlock()
	}
}

func (c *eventCounts) snapshot() map[pleg.EventType]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[pleg.EventType]int, len(c.byType))
	for k, v := range c.byType {
		out[k] = v
	}
	return out
}

// summary is one frame of the demo's display.
type summary struct {
	elapsed              time.Duration
	final                bool
	pods                 int
	running, exited      int
	totals               map[pleg.EventType]int
	perSecond            map[pleg.EventType]int
	relists              uint64
	relistP50, relistP99 time.Duration
	health               string
	mode                 string
}

func demoSummary(
	d *daemon.Daemon,
	counts *eventCounts,
	prev map[pleg.EventType]int,
	elapsed time.Duration,
	final bool,
) summary {
	s := summary{
		elapsed:   elapsed,
		final:     final,
		totals:    counts.snapshot(),
		perSecond: map[pleg.EventType]int{},
		health:    "ok",
		mode:      modeLine(d.Gen.Status()),
	}
	for typ, n := range s.totals {
		s.perSecond[typ] = n - prev[typ]
	}
	for _, e := range d.Cache.GetAll() {
		s.pods++
		for _, c := range e.Status.Containers {
			switch c.GetState() {
			case runtimeapi.ContainerState_CONTAINER_RUNNING:
				s.running++
			case runtimeapi.ContainerState_CONTAINER_EXITED:
				s.exited++
			}
		}
	}
	if ok, err := d.Gen.Healthy(); !ok {
		s.health = "PLEG is not healthy: " + err.Error()
	}
	s.relists, s.relistP50, s.relistP99 = relistQuantiles(d.Registry)
	return s
}

// relistQuantiles estimates the relist duration's p50 and p99 from the
// kubelet_pleg_relist_duration_seconds buckets, as PromQL's
// histogram_quantile would.
func relistQuantiles(g prometheus.Gatherer) (count uint64, p50, p99 time.Duration) {
	families, err := g.Gather()
	if err != nil {
		return 0, 0, 0
	}
	for _, f := range families {
		if f.GetName() != "kubelet_pleg_relist_duration_seconds" || len(f.GetMetric()) == 0 {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		return h.GetSampleCount(), seconds(metrics.HistogramQuantile(h, 0.5)), seconds(metrics.HistogramQuantile(h, 0.99))
	}
	return 0, 0, 0
}

// seconds turns a metric's seconds into a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// summaryView prints frames: on a terminal, the whole summary redrawn in
// place, each line cut to the terminal's width so that none wraps and
// the redraw knows how many lines to take back; elsewhere (a pipe, a
// file, a CI log) one line a second and the whole summary at the end.
type summaryView struct {
	w        io.Writer
	terminal bool
	// width is the terminal's, in columns; 0 when it cannot be told.
	width int
	lines int
}

func newSummaryView(w io.Writer) *summaryView {
	v := &summaryView{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		v.terminal = true
		if width, _, err := term.GetSize(int(f.Fd())); err == nil {
			v.width = width
		}
	}
	return v
}

func (v *summaryView) render(s summary) {
	if !v.terminal && !s.final {
		_, _ = fmt.Fprintln(v.w, s.line()) // stdout: see global.printf
		return
	}
	var b strings.Builder
	state := "running"
	if s.final {
		state = "done"
	}
	fmt.Fprintf(&b, "%s for %s\n", state, s.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  pods        %d (containers: %d running, %d exited)\n", s.pods, s.running, s.exited)
	fmt.Fprintf(&b, "  events/s    %s\n", eventLine(s.perSecond))
	fmt.Fprintf(&b, "  events      %s\n", eventLine(s.totals))
	fmt.Fprintf(
		&b,
		"  relist      p50 %v  p99 %v  (%d relists)\n",
		s.relistP50.Round(time.Millisecond),
		s.relistP99.Round(time.Millisecond),
		s.relists,
	)
	fmt.Fprintf(&b, "  health      %s\n", s.health)
	fmt.Fprintf(&b, "  mode        %s\n", s.mode)
	text := b.String()
	if v.terminal {
		text = fit(text, v.width)
		if v.lines > 0 {
			// Up over the previous frame and clear it.
			_, _ = fmt.Fprintf(v.w, "\033[%dA\033[J", v.lines) // stdout: see global.printf
		}
	} else {
		_, _ = fmt.Fprintln(v.w)
	}
	_, _ = fmt.Fprint(v.w, text)
	v.lines = strings.Count(text, "\n")
}

// line is a frame in one line, for a log.
func (s summary) line() string {
	return fmt.Sprintf("%s  pods %d  running %d  exited %d  events/s %s  relist p50 %v p99 %v  health %s",
		s.elapsed.Round(time.Second), s.pods, s.running, s.exited, eventLine(s.perSecond),
		s.relistP50.Round(time.Millisecond), s.relistP99.Round(time.Millisecond), s.health)
}

// fit cuts each line of text to width-1 columns: a line as wide as the
// terminal already wraps on some terminals. Width 0 leaves text alone.
func fit(text string, width int) string {
	if width <= 1 {
		return text
	}
	var b strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if r := []rune(line); len(r) > width-1 {
			line = string(r[:width-2]) + "…"
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// modeLine says in a few words how the generator learns of changes.
func modeLine(st pleg.Status) string {
	stamp := func(t time.Time) string { return t.Local().Format("15:04:05") }
	switch {
	case st.Mode == pleg.ModeGeneric:
		return fmt.Sprintf("generic, relist every %v", st.RelistPeriod)
	case st.Evented:
		return fmt.Sprintf("evented since %s, safety-net relist every %v", stamp(st.StreamSince), st.RelistPeriod)
	case st.NoStream:
		return fmt.Sprintf("relist every %v; the runtime has no event stream", st.RelistPeriod)
	case st.StreamConnected:
		return fmt.Sprintf("relist every %v; event stream up %s, not driving yet", st.RelistPeriod, stamp(st.StreamSince))
	case st.StreamSince.IsZero():
		return fmt.Sprintf("relist every %v; connecting to the event stream", st.RelistPeriod)
	default:
		return fmt.Sprintf(
			"relist every %v; event stream down since %s: %v",
			st.RelistPeriod,
			stamp(st.StreamSince),
			st.StreamError,
		)
	}
}

func eventLine(m map[pleg.EventType]int) string {
	var parts []string
	types := []pleg.EventType{
		pleg.ContainerStarted, pleg.ContainerDied, pleg.ContainerRemoved, pleg.PodSync, pleg.ConditionMet,
	}
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(string(t), "Container"), m[t]))
	}
	return strings.Join(parts, "  ")
}
