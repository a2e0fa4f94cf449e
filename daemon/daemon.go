// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package daemon assembles the node daemon that `pleg run` runs: a
// generator over a runtime, its pod cache and metrics, the journal it
// commits its events to (on disk with a state directory) and the HTTP API,
// run until told to stop.
//
// An embedder with a runtime of its own gets the whole daemon, API and
// journal included, from New and Run; see the package example. The parts
// stay usable alone: pleg.New for the generator, package api for the HTTP
// handler and the journal.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/kubeletpleg"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/otlpexport"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtimecheck"
)

// Defaults of Config.
const (
	DefaultListen      = "127.0.0.1:9847"
	DefaultEventBuffer = journal.DefaultMaxEvents
	// DefaultStateDir is where the chart and the systemd unit have `pleg
	// run` keep its journal on a node. `pleg run` takes none unless given
	// --state-dir, so that a run by hand does not share it.
	DefaultStateDir = "/var/lib/pleg"
)

// Config configures a Daemon.
type Config struct {
	// Runtime is the runtime to watch, uninstrumented: the daemon counts
	// its calls in kubelet_runtime_operations_*.
	Runtime runtime.Runtime
	// Generator holds the generator's options; Cache, Registerer and
	// Logger are set by the daemon.
	Generator pleg.Options
	// Listen serves the whole API: host:port or unix:///path; default
	// 127.0.0.1:9847. The pods and the event stream are what the
	// kubelet's retired read-only port gave away: keep it on loopback or
	// a unix socket, or set WebConfigFile.
	Listen string
	// MetricsListen, if set, serves /metrics and the probes (/healthz,
	// /readyz, /livez) only, fit to face the pod network.
	MetricsListen string
	// ListenGroup, a group name or number, owns the unix sockets; they
	// are created with mode 0660.
	ListenGroup string
	// WebConfigFile is a Prometheus exporter web configuration file (TLS,
	// client certificates, basic auth; see
	// github.com/prometheus/exporter-toolkit) for every listener; empty
	// for plain HTTP.
	WebConfigFile string
	// EventBuffer and EventBufferBytes bound the events /v1/events can
	// resume from, by count and by encoded size; defaults 65,536 and
	// 32 MiB.
	EventBuffer      int
	EventBufferBytes int64
	// EventRetention, if positive, also drops events older than that
	// (journal.Options.Retention); zero keeps them however old.
	EventRetention time.Duration
	// StateDir keeps the journal (the events, numbered, and what was last
	// reported of every container) across restarts; empty keeps it in
	// memory, and a restart reports every container again. See package
	// journal.
	StateDir string
	// IdentifyTimeout bounds how long New waits for the runtime to say
	// who it is (CRI Version), with a state directory: the journal sets
	// aside a store written over another runtime. Default 10 s.
	IdentifyTimeout time.Duration
	// StateSync is how often the journal's writes are forced to disk
	// (journal.Options.Sync): what a machine that goes down may lose.
	StateSync time.Duration
	// MaxStreams, MaxStreamsPerClient and StreamIdleTimeout bound the
	// /v1/events streams; zero takes api's defaults.
	MaxStreams          int
	MaxStreamsPerClient int
	StreamIdleTimeout   time.Duration
	// Limits bound the connections of each listener.
	Limits Limits
	// Profiling serves Go's profiles under /debug/pprof/ on Listen.
	Profiling bool
	Logger    *slog.Logger
	// Kubelet, if set, reads the kubelet's own PLEG from its metrics,
	// every 10 s: pleg_kubelet_pleg_last_seen_seconds, the node condition's
	// KubeletRelistBehind, and in each flight recording.
	Kubelet kubeletpleg.Source
	// LogDropped, if set, counts the log lines dropped because the log's
	// reader did not keep up (package internal/logsink):
	// pleg_log_lines_dropped_total.
	LogDropped func() uint64
	// Kube, if set, reports into the Kubernetes API: a node condition and
	// events (package kubereport). Its Logger, Registerer and, when the
	// runtime tells them, Sizes are set by the daemon.
	Kube *kubereport.Config
	// FlightRecorder keeps the runtime's and the host's state at the
	// onset of an incident, in StateDir.
	FlightRecorder FlightRecorder
	// OTLP, with an endpoint, exports the journal's events to an
	// OpenTelemetry Collector as log records.
	OTLP OTLP
	// Diagnosis configures the daemon's own diagnosis and bundle, and the
	// listener that serves them with the recordings alone.
	Diagnosis Diagnosis
}

// Daemon is an assembled daemon. Create it with New, then Run it.
type Daemon struct {
	cfg      Config
	Gen      *pleg.Generator
	Cache    *podcache.Cache
	Registry *prometheus.Registry
	Journal  *journal.Journal
	API      *api.Server
	servers  []*server // the API's, then the metrics' if any
	kube     *kubereport.Reporter
	build    *metrics.BuildInfo
	// Recorder is the flight recorder, or nil when it is off.
	Recorder *flightrec.Recorder
	exporter *otlpexport.Exporter
	// check asks for the runtime's Status as the kubelet does; nil for a
	// runtime without Status.
	check *runtimecheck.Check
	// kubelet reads the kubelet's own PLEG; nil without Config.Kubelet.
	kubelet *kubeletWatch
	// diagnosisAddr is the diagnosis listener's address, or "".
	diagnosisAddr string
}

// diagnosisMaxConnections caps the diagnosis listener's connections.
const diagnosisMaxConnections = 16

// DiagnosisAddr returns the address of the diagnosis listener, or "" without
// one.
func (d *Daemon) DiagnosisAddr() string { return d.diagnosisAddr }

// New assembles a daemon and opens its listeners, so that a bad address,
// a port in use or a bad web config fails here, before anything runs.
func New(cfg Config) (*Daemon, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("no runtime")
	}
	cfg = cfg.withDefaults()
	if err := web.Validate(cfg.WebConfigFile); err != nil {
		return nil, fmt.Errorf("web config %s: %w", cfg.WebConfigFile, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ops, err := metrics.NewRuntimeOperations(reg)
	if err != nil {
		return nil, err
	}
	build, err := newBuildInfo(reg)
	if err != nil {
		return nil, err
	}
	conns, err := newConnMetrics(reg)
	if err != nil {
		return nil, err
	}
	jopts := journal.Options{
		Dir: cfg.StateDir, MaxEvents: cfg.EventBuffer, MaxBytes: cfg.EventBufferBytes, Sync: cfg.StateSync,
		Retention: cfg.EventRetention, Logger: cfg.Logger, Registerer: reg,
	}
	if cfg.StateDir != "" {
		jopts.Runtime, jopts.RuntimeUnconfirmed = identify(cfg.Runtime, cfg.IdentifyTimeout, cfg.Logger)
	}
	jn, err := journal.Open(jopts)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	d := &Daemon{cfg: cfg, Registry: reg, Journal: jn, Cache: podcache.New(), build: build}
	if err := d.assemble(ops); err != nil {
		return nil, errors.Join(err, jn.Close())
	}
	if err := d.newExporter(); err != nil {
		return nil, errors.Join(fmt.Errorf("otlp export: %w", err), jn.Close())
	}
	if err := d.listen(conns); err != nil {
		if d.exporter != nil {
			_ = d.exporter.Close() // never ran: nothing to lose
		}
		return nil, errors.Join(err, jn.Close())
	}
	return d, nil
}

// withDefaults fills in what the configuration leaves out.
func (cfg Config) withDefaults() Config {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.EventBuffer == 0 {
		cfg.EventBuffer = DefaultEventBuffer
	}
	if cfg.IdentifyTimeout == 0 {
		cfg.IdentifyTimeout = versionCallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// assemble creates the generator over the instrumented runtime, the
// reporter into Kubernetes if asked, and the API server.
func (d *Daemon) assemble(ops *metrics.RuntimeOperations) error {
	cfg := d.cfg
	opts := cfg.Generator
	opts.Cache, opts.Store, opts.Registerer, opts.Logger = d.Cache, d.Journal, d.Registry, cfg.Logger
	calls, recorded := flightCalls(cfg)
	gen, err := pleg.New(runtime.Instrument(calls.Wrap(cfg.Runtime), ops), opts)
	if err != nil {
		return err
	}
	if d.Recorder, err = newFlightRecorder(cfg, recorded, gen, d.Registry, d.onRecording); err != nil {
		return err
	}
	if d.check, err = newRuntimeCheck(cfg, ops); err != nil {
		return err
	}
	if cfg.Kubelet != nil {
		if d.kubelet, err = newKubeletWatch(cfg.Kubelet, d.Registry); err != nil {
			return err
		}
	}
	view := runtimeView{gen: gen, calls: calls, check: d.check}
	kube, err := newKubeReporter(cfg, gen, view, d.kubelet, d.Registry)
	if err != nil {
		return err
	}
	d.Gen, d.kube = gen, kube
	checks := []pleg.HealthCheck{gen.HealthCheck()}
	if err := registerHealthMetrics(d.Registry, checks, gen); err != nil {
		return err
	}
	err = errors.Join(d.Registry.Register(newUnansweredGauge(view)), d.Registry.Register(newLatencyGauge(view)))
	if err != nil {
		return err
	}
	if cfg.LogDropped != nil {
		if err := d.Registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "pleg_log_lines_dropped_total",
			Help: "Log lines dropped because the log's reader (in a pod, its shim) did not keep up: the daemon's log never " +
				"blocks it.",
		}, func() float64 { return float64(cfg.LogDropped()) })); err != nil {
			return err
		}
	}
	cache := d.Cache
	d.API = api.NewServer(api.Options{
		Checks: checks,
		Ready:  readiness(cache, gen),
		Mode: func() (string, string) {
			st := gen.Status()
			return string(st.InForce()), st.String()
		},
		Details:             details(cfg.Runtime, d.Journal, cache, gen),
		Cache:               cache,
		Journal:             d.Journal,
		Gatherer:            d.Registry,
		MaxStreams:          cfg.MaxStreams,
		MaxStreamsPerClient: cfg.MaxStreamsPerClient,
		StreamIdleTimeout:   cfg.StreamIdleTimeout,
		Profiling:           cfg.Profiling,
		Logger:              cfg.Logger,
		Doctor:              newDoctorService(cfg, gen, d.Registry, d.Recorder),
	})
	d.API.HandleRecordings(recordings(d.Recorder))
	return nil
}

// listen opens the API's listener and the metrics' if asked, and warns
// when the API faces the network unprotected.
func (d *Daemon) listen(conns connMetrics) error {
	cfg := d.cfg
	limits := cfg.Limits.withDefaults()
	lis, err := Listen(cfg.Listen, cfg.ListenGroup)
	if err != nil {
		return err
	}
	d.servers = append(d.servers, newServer("api", lis, d.API, limits, conns, cfg.Logger))
	if cfg.MetricsListen != "" {
		mlis, err := Listen(cfg.MetricsListen, cfg.ListenGroup)
		if err != nil {
			_ = lis.Close() // never served: nothing to lose
			return err
		}
		d.servers = append(d.servers, newServer("metrics", mlis, d.API.Probes(), limits, conns, cfg.Logger))
	}
	if cfg.Diagnosis.Listen != "" {
		dlis, err := Listen(cfg.Diagnosis.Listen, cfg.ListenGroup)
		if err != nil {
			for _, s := range d.servers {
				_ = s.lis.Close() // never served: nothing to lose
			}
			return err
		}
		// Its few clients are operators, through the API server: a
		// handful of connections is all it takes.
		dl := limits
		dl.MaxConnections = min(limits.MaxConnections, diagnosisMaxConnections)
		d.servers = append(d.servers, newServer("diagnosis", dlis, d.API.Diagnosis(), dl, conns, cfg.Logger))
		d.diagnosisAddr = d.servers[len(d.servers)-1].addr
		cfg.Logger.Info("The diagnosis listener serves /v1/doctor, /v1/bundle and /v1/recordings alone, for the "+
			"API server's pod proxy: whoever reaches it reads pod names, error messages and recordings",
			"addr", d.diagnosisAddr)
	}
	if !loopback(lis) && cfg.WebConfigFile == "" {
		cfg.Logger.Warn("The API faces the network without TLS or authentication: "+
			"whoever reaches it reads every pod's name, IPs, images and exit messages, and the event stream; "+
			"serve it on loopback or a unix socket, with only /metrics and the probes on --metrics-listen, "+
			"or give a web config file",
			"addr", d.servers[0].addr)
	}
	return nil
}

// readiness is firstRelistEnded, held once it holds: a runtime that comes
// up after pleg has found it down must not turn pleg unready while its
// first successful relist writes the cache.
func readiness(cache *podcache.Cache, gen *pleg.Generator) func() (bool, error) {
	var ended atomic.Bool
	return func() (bool, error) {
		if ended.Load() {
			return true, nil
		}
		ok, err := firstRelistEnded(cache, gen)
		if ok {
			ended.Store(true)
		}
		return ok, err
	}
}

// firstRelistEnded is the daemon's readiness: the first relist has ended,
// written to the cache (the global time is set once a relist has written
// every pod; before, /v1/pods shows part of the node) or failed to list.
// A daemon whose runtime is down from the start is ready once its first
// list has failed: it serves, and what it serves is the news that the
// runtime is unreachable (/healthz 500, pleg_node_condition, /v1/pods
// empty with a null globalTimestamp). Waiting for the runtime would make
// a down runtime hold every rollout of the monitor that reports it.
func firstRelistEnded(cache *podcache.Cache, gen *pleg.Generator) (bool, error) {
	if !cache.GlobalTime().IsZero() {
		return true, nil
	}
	if st := gen.Status(); !st.ListFailingSince.IsZero() {
		return true, nil
	}
	return false, errors.New("the first relist has not ended yet: the runtime has not answered its lists, " +
		"or the pods it listed are being inspected and written to the cache")
}

// cacheLine tells, for a health page, how complete /v1/pods is.
func cacheLine(cache *podcache.Cache, gen *pleg.Generator) string {
	if t := cache.GlobalTime(); !t.IsZero() {
		return "cache: complete as of the relist of " + t.UTC().Format(time.RFC3339)
	}
	st := gen.Status()
	if !st.ListFailingSince.IsZero() {
		return fmt.Sprintf("cache: EMPTY, no relist has succeeded: the runtime's lists fail since %s: %v",
			st.ListFailingSince.UTC().Format(time.RFC3339), st.ListError)
	}
	return "cache: not written yet, the first relist is under way"
}

// details are the lines /healthz?verbose and /readyz?verbose tell after
// the checks: how complete the cache is, what the runtime can do, as far
// as the daemon's calls showed it, when the runtime reports that (the CRI
// adapter does), and how the journal fares.
func details(rt runtime.Runtime, jn *journal.Journal, cache *podcache.Cache, gen *pleg.Generator) func() []string {
	cr, _ := rt.(runtime.CapabilityReporter)
	return func() []string {
		lines := []string{cacheLine(cache, gen)}
		if cr != nil {
			for _, l := range cr.Capabilities().Lines() {
				lines = append(lines, "runtime "+l)
			}
		}
		return append(lines, jn.Status().String())
	}
}

// endpointer is a runtime that tells the endpoint it talks to (the CRI
// adapter, and --runtime-endpoint auto once it has found one).
type endpointer interface{ Endpoint() string }

// identify tells the journal which runtime it describes: the endpoint,
// with symbolic links resolved (/var/run/crio/crio.sock is
// /run/crio/crio.sock), and the name and version CRI Version gives,
// asked once within timeout. A runtime that does not answer is
// unconfirmed: the journal then sets aside a store that names a runtime
// rather than report another runtime's containers as gone.
func identify(rt runtime.Runtime, timeout time.Duration, log *slog.Logger) (journal.Runtime, bool) {
	var id journal.Runtime
	unconfirmed := false
	if v, ok := rt.(versioner); ok {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		resp, err := v.Version(ctx)
		cancel()
		if err != nil {
			unconfirmed = true
			log.Warn("The runtime did not say who it is at start: a journal in the state directory that names a "+
				"runtime is set aside rather than trusted", "err", err)
		} else {
			id.Name, id.Version = resp.GetRuntimeName(), resp.GetRuntimeVersion()
		}
	}
	if e, ok := rt.(endpointer); ok {
		id.Endpoint = canonicalEndpoint(e.Endpoint())
	}
	return id, unconfirmed
}

// canonicalEndpoint writes a unix socket's endpoint as unix:///path, its
// symbolic links resolved, so that two names of one socket compare equal
// (a bare path means the same as unix://path).
func canonicalEndpoint(ep string) string {
	path, ok := strings.CutPrefix(ep, "unix://")
	if !ok && !strings.HasPrefix(ep, "/") {
		return ep
	}
	if !ok {
		path = ep
	}
	path = filepath.Clean(path)
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	return "unix://" + path
}

// startVersionWatch keeps pleg_build_info's runtime labels current, when
// the runtime tells its version, and returns what stops it.
func (d *Daemon) startVersionWatch() (stop func()) {
	rt, ok := d.cfg.Runtime.(versioner)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchRuntimeVersion(ctx, rt, d.build, d.cfg.Logger)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Addr returns the address the API listens on.
func (d *Daemon) Addr() string { return d.servers[0].addr }

// MetricsAddr returns the address of the metrics and probes listener, or
// "" without one.
func (d *Daemon) MetricsAddr() string {
	for _, s := range d.servers {
		if s.name == "metrics" {
			return s.addr
		}
	}
	return ""
}

// shutdownTimeout bounds a stop. It exceeds the API's write timeout, so
// that a handler blocked in a write to a client that does not read is
// cut by its deadline and returns, rather than outliving the stop.
const shutdownTimeout = api.DefaultWriteTimeout + 5*time.Second

// Run runs the daemon until ctx ends, then stops it: /readyz turns
// unready and event streams end cleanly, in-flight requests finish, the
// listeners close (a unix socket is removed), the generator stops. It
// returns nil after a clean stop.
func (d *Daemon) Run(ctx context.Context) error {
	d.Gen.Start()
	stopCheck := startRuntimeCheck(d.check)
	stopKubelet := startKubeletWatch(d.kubelet)
	stopKube := startKube(d.kube, d.cfg.Logger)
	stopVersion := d.startVersionWatch()
	stopRecorder := startRecorder(d.Recorder, d.cfg.Logger)
	stopExporter := d.startExporter()

	served := make(chan error, len(d.servers))
	for _, s := range d.servers {
		go func() {
			if err := s.serve(d.cfg.WebConfigFile, d.cfg.Logger); err != nil {
				served <- fmt.Errorf("serving %s: %w", s.addr, err)
				return
			}
			served <- nil
		}()
	}
	if m := d.MetricsAddr(); m != "" {
		d.cfg.Logger.Info("Serving the PLEG API", "addr", d.Addr(), "metrics", m)
	} else {
		d.cfg.Logger.Info("Serving the PLEG API", "addr", d.Addr())
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		if err == nil {
			err = errors.New("a listener stopped serving")
		}
	}
	d.cfg.Logger.Info("Stopping")
	// Streams end first: Shutdown waits for handlers, it does not end
	// them.
	d.API.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shut := make(chan error, len(d.servers))
	for _, s := range d.servers {
		go func() { shut <- s.srv.Shutdown(shutdownCtx) }()
	}
	for range d.servers {
		if serr := <-shut; serr != nil && err == nil {
			err = fmt.Errorf("stopping the API: %w", serr)
		}
	}
	// Shutdown closes the listeners; one whose Serve had not started yet
	// is closed here, which also removes a unix socket.
	for _, s := range d.servers {
		_ = s.lis.Close()
	}
	stopKube()
	stopKubelet()
	stopCheck()
	stopVersion()
	stopRecorder()
	d.Gen.Stop()
	stopExporter()
	if jerr := d.Journal.Close(); jerr != nil {
		d.cfg.Logger.Error("Closing the journal", "err", jerr)
	}
	return err
}
