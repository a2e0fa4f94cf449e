// Package daemon assembles the node daemon that `pleg run` runs: a
// generator over a runtime, its pod cache and metrics, the event journal
// and the HTTP API, run until told to stop.
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
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
)

// Defaults of Config.
const (
	DefaultListen      = "127.0.0.1:9847"
	DefaultEventBuffer = 65536
)

// Config configures a Daemon.
type Config struct {
	// Runtime is the runtime to watch, uninstrumented: the daemon counts
	// its calls in kubelet_runtime_operations_*.
	Runtime runtime.Runtime
	// Generator holds the generator's options; Cache, Registerer and
	// Logger are set by the daemon.
	Generator pleg.Options
	// Listen is host:port or unix:///path; default 127.0.0.1:9847.
	Listen string
	// EventBuffer is how many events /v1/events can resume from.
	EventBuffer int
	// MaxStreams caps concurrent /v1/events clients.
	MaxStreams int
	// Profiling serves Go's profiles under /debug/pprof/.
	Profiling bool
	Logger    *slog.Logger
}

// Daemon is an assembled daemon. Create it with New, then Run it.
type Daemon struct {
	cfg      Config
	Gen      *pleg.Generator
	Cache    *podcache.Cache
	Registry *prometheus.Registry
	Journal  *api.Journal
	API      *api.Server
	listener net.Listener
}

// New assembles a daemon and opens its listener, so that a bad address or
// a port in use fails here, before anything runs.
func New(cfg Config) (*Daemon, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("daemon: no runtime")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.EventBuffer == 0 {
		cfg.EventBuffer = DefaultEventBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ops, err := metrics.NewRuntimeOperations(reg)
	if err != nil {
		return nil, err
	}
	cache := podcache.New()
	opts := cfg.Generator
	opts.Cache, opts.Registerer, opts.Logger = cache, reg, cfg.Logger
	gen, err := pleg.New(runtime.Instrument(cfg.Runtime, ops), opts)
	if err != nil {
		return nil, err
	}
	lis, err := Listen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	journal := api.NewJournal(cfg.EventBuffer, uint64(time.Now().UnixMicro()))
	d := &Daemon{
		cfg: cfg, Gen: gen, Cache: cache, Registry: reg, Journal: journal, listener: lis,
		API: api.NewServer(api.Options{
			Checks: []pleg.HealthCheck{gen.HealthCheck()},
			Mode: func() (string, string) {
				st := gen.Status()
				return string(st.InForce()), st.String()
			},
			Details:    runtimeDetails(cfg.Runtime),
			Cache:      cache,
			Journal:    journal,
			Gatherer:   reg,
			MaxStreams: cfg.MaxStreams,
			Profiling:  cfg.Profiling,
			Logger:     cfg.Logger,
		}),
	}
	return d, nil
}

// runtimeDetails are the lines /healthz?verbose tells of the runtime:
// what it can do, as far as the daemon's calls showed it, when the
// runtime reports that (the CRI adapter does).
func runtimeDetails(rt runtime.Runtime) func() []string {
	cr, ok := rt.(runtime.CapabilityReporter)
	if !ok {
		return nil
	}
	return func() []string {
		lines := cr.Capabilities().Lines()
		for i, l := range lines {
			lines[i] = "runtime " + l
		}
		return lines
	}
}

// Addr returns the address the API listens on.
func (d *Daemon) Addr() string {
	if d.listener.Addr().Network() == "unix" {
		return "unix://" + d.listener.Addr().String()
	}
	return d.listener.Addr().String()
}

// Run runs the daemon until ctx ends, then stops it: event streams end
// cleanly, in-flight requests finish, the generator stops. It returns nil
// after a clean stop.
func (d *Daemon) Run(ctx context.Context) error {
	sub := d.Gen.Subscribe()
	defer sub.Close()
	journalCtx, stopJournal := context.WithCancel(context.Background())
	journalDone := make(chan struct{})
	go func() {
		defer close(journalDone)
		d.Journal.Run(journalCtx, sub)
	}()
	d.Gen.Start()

	srv := &http.Server{Handler: d.API, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(d.API.Close)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(d.listener) }()
	d.cfg.Logger.Info("Serving the PLEG API", "addr", d.Addr())

	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		err = fmt.Errorf("serving %s: %w", d.Addr(), err)
	}
	d.cfg.Logger.Info("Stopping")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil && err == nil {
		err = fmt.Errorf("stopping the API: %w", serr)
	}
	d.Gen.Stop()
	stopJournal()
	<-journalDone
	if d.listener.Addr().Network() == "unix" {
		_ = os.Remove(d.listener.Addr().String())
	}
	return err
}

// Listen opens host:port, or a unix socket for unix:///path (replacing a
// stale socket file).
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("listen address %q: want unix:///absolute/path", addr)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
		lis, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		return lis, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("listen address %q: want host:port or unix:///path: %w", addr, err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return lis, nil
}
