// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubereport reports what a generator sees into the Kubernetes
// API, as node-problem-detector does for the problems it finds: a node
// condition of pleg's own (ConditionType) that turns on, naming the cause,
// when relisting fails or approaches its threshold, a pod's status calls
// hang or the lists near the kubelet's message limit; and events
// (events.k8s.io/v1, through client-go's recorder and its aggregation) on a
// pod whose inspection hangs or keeps failing, and on the node when the
// runtime stops answering or the container event stream falls back.
//
// It reads the generator's Status, which never calls the runtime, and
// writes from goroutines of its own: an API server that is slow or down
// delays only the reports, never relisting, the generator's events or its
// health. What cannot be written is retried, or dropped, and counted in
// pleg_kube_reports_total{result}.
//
// A fleet's nodes often change at once (a runtime upgrade that hangs, its
// recovery), so every write is bounded for the API server's sake: each
// node writes its changes at its own moment of every Config.Spread; its
// requests all pass one token bucket (ClientOptions.QPS and Burst); the
// condition is written at most every MinWriteInterval; repeated events
// become series; and pod events have a budget of their own.
package kubereport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubeletpleg"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtimecheck"
)

// Component is the reporting controller of pleg's events, and the field
// manager of its condition.
const Component = "pleg"

const fieldManager = Component

// Defaults of Config.
const (
	DefaultInterval         = time.Second
	DefaultGrace            = 10 * time.Second
	DefaultMinWriteInterval = 5 * time.Second
	DefaultMaxRetryInterval = 30 * time.Second
	// DefaultHeartbeat is node-problem-detector's: the condition's
	// lastHeartbeatTime is refreshed this often when nothing changes.
	DefaultHeartbeat = 5 * time.Minute
	// DefaultStopTimeout bounds the last write, the condition set to
	// Unknown as the reporter stops: a stop is not held up long by an API
	// server that does not answer.
	DefaultStopTimeout = 5 * time.Second
	// DefaultPodEventBurst and DefaultPodEventsPerMinute bound the pod
	// events, so that a runtime that hangs for every pod does not write
	// one event per pod at once: the node's condition and events tell it.
	DefaultPodEventBurst      = 10
	DefaultPodEventsPerMinute = 6
	// DefaultSpread is the kubelet's node status period: a cause common
	// to every node reaches the API server from their kubelets spread
	// over that much, as each one's status loop comes round; pleg's
	// writes of a change are spread as widely.
	DefaultSpread = 10 * time.Second
)

// The values of pleg_kube_reports_total's result label.
const (
	resultWritten = "written"
	resultRetried = "retried"
	resultDropped = "dropped"
)

// Source is what the reporter reads; *pleg.Generator is one. Status must
// be cheap and never wait for the runtime.
type Source interface {
	Status() pleg.Status
}

// RuntimeState is the runtime check's state; *runtimecheck.Check is one.
type RuntimeState interface {
	State() runtimecheck.State
}

// KubeletState is the last reading of the kubelet's own PLEG, and
// whether there is one.
type KubeletState interface {
	Reading() (kubeletpleg.Reading, bool)
}

// Client is the part of the Kubernetes API the reporter writes to; a
// kubernetes.Interface is one, and so is NewClient's.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	EventsV1() eventsv1client.EventsV1Interface
}

// Config configures a Reporter. NodeName and Client are required.
type Config struct {
	// NodeName is the Node object of this node.
	NodeName string
	Client   Client
	// Sizes, if set, tells the sizes of the runtime's whole-node lists
	// (the CRI adapter does).
	Sizes runtime.ListSizer
	// Runtime, if set, tells how the runtime answers its Status, asked
	// as the kubelet asks it (runtimecheck.Check).
	Runtime RuntimeState
	// Kubelet, if set, tells what the kubelet's own PLEG said when it
	// was last read.
	Kubelet KubeletState
	// Clock, Logger and Registerer default to the real clock,
	// slog.Default() and none.
	Clock      clock.WithTicker
	Logger     *slog.Logger
	Registerer prometheus.Registerer

	// Interval is how often the status is read (DefaultInterval).
	Interval time.Duration
	// Grace is how long the runtime's lists, or a pod's inspection, must
	// fail with another error than a deadline before it is reported
	// (DefaultGrace): a runtime restart is no problem of the node's.
	Grace time.Duration
	// MinWriteInterval is the least time between two writes of the
	// condition, and the first retry's delay (DefaultMinWriteInterval);
	// MaxRetryInterval caps the retries' backoff (DefaultMaxRetryInterval).
	MinWriteInterval time.Duration
	MaxRetryInterval time.Duration
	// Heartbeat is how often the condition is written when nothing
	// changes (DefaultHeartbeat): a lastHeartbeatTime older than that
	// tells that pleg no longer runs, or no longer reaches the API server.
	Heartbeat time.Duration
	// StopTimeout bounds the write that sets the condition to Unknown
	// when Run ends (DefaultStopTimeout).
	StopTimeout time.Duration
	// PodEventBurst and PodEventsPerMinute bound the pod events
	// (DefaultPodEventBurst, DefaultPodEventsPerMinute); those over it are
	// dropped and counted.
	PodEventBurst      int
	PodEventsPerMinute int
	// Spread is how far the writes of a change are spread over a fleet
	// (DefaultSpread): the node writes its changes (the condition, the
	// events) at its own place in every window of that length, drawn
	// when it starts, so that a fleet whose nodes all change at once
	// writes over that long rather than in one second, and no change
	// waits longer. The first heartbeat after a change comes at a random
	// point of the second half of Heartbeat.
	Spread time.Duration
	// Rand returns the random numbers of the spread, in [0, 1), and must
	// be safe for concurrent use; default math/rand/v2's Float64. Tests
	// fix it.
	Rand func() float64
}

func (c *Config) validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("kubereport: no client"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("kubereport: no node name"))
	} else if msgs := validation.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("kubereport: node name %q: %s", c.NodeName, msgs[0]))
	}
	for name, d := range map[string]time.Duration{
		"Interval": c.Interval, "Grace": c.Grace, "MinWriteInterval": c.MinWriteInterval,
		"MaxRetryInterval": c.MaxRetryInterval, "Heartbeat": c.Heartbeat, "StopTimeout": c.StopTimeout,
		"Spread": c.Spread,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("kubereport: %s %v: must not be negative", name, d))
		}
	}
	if c.PodEventBurst < 0 || c.PodEventsPerMinute < 0 {
		errs = append(errs, errors.New("kubereport: the pod event bounds must not be negative"))
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&c.Interval, DefaultInterval)
	set(&c.Grace, DefaultGrace)
	set(&c.MinWriteInterval, DefaultMinWriteInterval)
	set(&c.MaxRetryInterval, DefaultMaxRetryInterval)
	set(&c.Heartbeat, DefaultHeartbeat)
	set(&c.StopTimeout, DefaultStopTimeout)
	set(&c.Spread, DefaultSpread)
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	c.MaxRetryInterval = max(c.MaxRetryInterval, c.MinWriteInterval)
	if c.PodEventBurst == 0 {
		c.PodEventBurst = DefaultPodEventBurst
	}
	if c.PodEventsPerMinute == 0 {
		c.PodEventsPerMinute = DefaultPodEventsPerMinute
	}
}

// Reporter reports a generator's state into the Kubernetes API. Create it
// with New and Run it.
type Reporter struct {
	src     Source
	cfg     Config
	reports *prometheus.CounterVec
	written *conditionGauge
	writer  *conditionWriter
	notices *notices
	podRate flowcontrol.PassiveRateLimiter
	spread  spreader
	// pending are the events waiting for the node's turn in the spread;
	// Run's loop owns them.
	pending pendingEvents

	runOnce sync.Once
}

// New returns a reporter of src's state. It registers
// pleg_kube_reports_total and pleg_node_condition with cfg.Registerer, and
// calls nothing else.
func New(src Source, cfg Config) (*Reporter, error) {
	if src == nil {
		return nil, errors.New("kubereport: no source")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	r := &Reporter{
		src: src,
		cfg: cfg,
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_kube_reports_total",
			Help: "Writes of pleg's node condition and events to the Kubernetes API, by result: written, retried (failed, to " +
				"be tried again) or dropped (refused, given up, superseded before it could be written, or over the pod event " +
				"rate).",
		}, []string{"result"}),
		written: newConditionGauge(),
		notices: newNotices(cfg.NodeName, cfg.Grace),
		podRate: flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(
			float32(cfg.PodEventsPerMinute)/60, cfg.PodEventBurst, cfg.Clock),
		spread: newSpreader(cfg.Spread, cfg.Rand),
	}
	for _, result := range []string{resultWritten, resultRetried, resultDropped} {
		r.reports.WithLabelValues(result) // each shows from the start
	}
	if cfg.Registerer != nil {
		if err := errors.Join(cfg.Registerer.Register(r.reports), cfg.Registerer.Register(r.written)); err != nil {
			return nil, fmt.Errorf("kubereport: %w", err)
		}
	}
	r.writer = newConditionWriter(cfg.Client.CoreV1().Nodes(), cfg.NodeName, cfg.Clock, cfg.Logger, r.count,
		cfg.MinWriteInterval, cfg.MaxRetryInterval, cfg.Heartbeat, r.spread)
	r.writer.onStored = r.written.set
	return r, nil
}

func (r *Reporter) count(result string) { r.reports.WithLabelValues(result).Inc() }

// Run reports until ctx ends, then sets the condition to Unknown (within
// StopTimeout) and returns; events still waiting for the node's turn, or
// that the recorder still retries, are given up. A Reporter runs once.
func (r *Reporter) Run(ctx context.Context) error {
	started := false
	r.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("kubereport: a Reporter runs once")
	}
	// client-go's recorder logs through the context's logger.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(r.cfg.Logger.Handler()))
	running, stopRunning := context.WithCancel(ctx)
	defer stopRunning()

	sink := newCountingSink(&events.EventSinkImpl{Interface: r.cfg.Client.EventsV1()}, r.count, r.cfg.NodeName)
	broadcaster := events.NewBroadcaster(sink)
	if err := broadcaster.StartRecordingToSinkWithContext(running); err != nil {
		return fmt.Errorf("kubereport: starting the event recorder: %w", err)
	}
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, Component)

	var wg sync.WaitGroup
	wg.Go(func() { r.writer.run(running) })

	r.cfg.Logger.Info("Reporting to the Kubernetes API", "node", r.cfg.NodeName, "condition", ConditionType)
	ticker := r.cfg.Clock.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	for {
		r.observe(recorder, r.cfg.Clock.Now())
		select {
		case <-ctx.Done():
			stopRunning()
			wg.Wait()
			for range r.pending.len() {
				r.count(resultDropped)
			}
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StopTimeout)
			defer cancel()
			r.writer.stop(last, r.cfg.Clock.Now())
			return nil
		case <-ticker.C():
		}
	}
}

// observe reads the status once, hands the verdict to the writer, queues
// the events it calls for until the node's turn, and records those whose
// turn has come. It never waits for the API server.
func (r *Reporter) observe(recorder events.EventRecorder, now time.Time) {
	st := r.src.Status()
	var sizes runtime.ListSizes
	if r.cfg.Sizes != nil {
		sizes = r.cfg.Sizes.ListSizes()
	}
	var rs runtimecheck.State
	if r.cfg.Runtime != nil {
		rs = r.cfg.Runtime.State()
	}
	o := observed{status: st, runtime: rs, sizes: sizes}
	if r.cfg.Kubelet != nil {
		o.kubelet, o.kubeletRead = r.cfg.Kubelet.Reading()
	}
	if v, known := assess(o, now, r.cfg.Grace); known {
		r.writer.set(v, now)
	}
	for _, e := range r.notices.next(st, now) {
		if e.regarding.Kind == "Pod" && !r.podRate.TryAccept() {
			r.count(resultDropped)
			continue
		}
		if !r.pending.add(e, r.spread.turn(now)) {
			r.count(resultDropped)
		}
	}
	for _, e := range r.pending.take(now) {
		// The note is passed as an argument: it is no format.
		recorder.Eventf(e.regarding, nil, e.eventType(), e.reason, e.action, "%s", e.note)
	}
}
