// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/internal/logsink"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/runtime/cri"
)

// minListSize is the least --max-list-size: below it a node of a few
// hundred containers could not be listed.
const minListSize = 1 << 20

// byteSize is a flag holding a number of bytes, written as a Kubernetes
// quantity: 24Mi, 1Gi, 25165824.
type byteSize struct{ n *int }

func (b byteSize) String() string {
	if b.n == nil {
		return "0"
	}
	return resource.NewQuantity(int64(*b.n), resource.BinarySI).String()
}

func (b byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a size such as 24Mi: %w", err)
	}
	v, ok := q.AsInt64()
	if !ok || v < minListSize || v > math.MaxInt32 {
		return fmt.Errorf("%s: want from 1Mi to 2Gi", s)
	}
	*b.n = int(v)
	return nil
}

func (byteSize) Type() string { return "size" }

// runLong is pleg run's help.
const runLong = `Run watches the runtime at --runtime-endpoint and serves, on --listen:

  GET /healthz          200 "ok", or 500 "PLEG is not healthy: <reason>"
  GET /readyz           200 once the first relist has ended (written, or its
                        lists failed) until pleg stops: pleg serves, whatever
                        the runtime's health; /livez: 200 while it answers
  GET /metrics          Prometheus metrics, with the kubelet's PLEG metric names
  GET /v1/pods          the pod status cache as JSON; /v1/pods/{uid} one pod
  GET /v1/events        live events, a JSON object a line (or Server-Sent Events
                        with Accept: text/event-stream); filters pod, namespace,
                        type; resume with since=SEQ or Last-Event-ID

With --state-dir (the chart and the systemd unit give /var/lib/pleg; without
it the journal is in memory), every event is written to the journal there
before any client can read it: after a restart, sequence numbers go on, a
client resuming with since=SEQ misses nothing, and what changed while pleg
was down is reported once, marked "afterRestart", while running containers
are not reported again. A journal written over another runtime (another
name or endpoint) is set aside, never reported from.

The pods and events say what runs on the node: keep --listen on loopback or a
unix socket (created 0660, in --listen-group), and give the kubelet's probes
and Prometheus --metrics-listen, which serves /metrics and the probes only.
--web-config-file adds TLS, client certificates and basic auth to both, in
the Prometheus exporters' format.

With --otlp-endpoint, every event of the journal is also sent to an
OpenTelemetry Collector as an OTLP log record (gRPC or HTTP/protobuf), at
least once and in order: a cursor in the state directory moves only once the
collector has accepted a batch, events wait in the journal while it is down
or refusing, and events the journal dropped before they were sent are named
by a loss record (docs/export.md).

With --simulate it watches an embedded simulated runtime instead.

The daemon sets Go's garbage collection target to 50 (GOGC=50) unless the
GOGC environment variable says otherwise; GOMEMLIMIT is honoured.`

// runFlags are pleg run's settings, as its flags set them.
type runFlags struct {
	cfg      daemon.Config
	simulate bool
	sim      simFlags
	kube     kubeFlags
	otlp     otlpFlags
	kubelet  kubeletFlags
}

func newRunCommand(g *global) *cobra.Command {
	var o runFlags
	cmd := &cobra.Command{
		Use:     "run",
		Short:   "Run the node daemon: watch the runtime and serve health, metrics, pods and events over HTTP",
		Long:    runLong,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return o.validate() },
		RunE:    func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	o.register(cmd.Flags(), g)
	return cmd
}

// validate rejects the flags' values the daemon could not run with, all at
// once.
func (o *runFlags) validate() error {
	cfg := &o.cfg
	var errs []error
	for _, v := range []struct {
		flag string
		n    int
	}{
		{"event-buffer", cfg.EventBuffer},
		{"max-streams", cfg.MaxStreams},
		{"max-streams-per-client", cfg.MaxStreamsPerClient},
		{"max-connections", cfg.Limits.MaxConnections},
	} {
		if v.n < 1 {
			errs = append(errs, fmt.Errorf("--%s %d: must be at least 1", v.flag, v.n))
		}
	}
	if cfg.EventBufferBytes < 1 {
		errs = append(errs, fmt.Errorf("--event-buffer-bytes %d: must be at least 1", cfg.EventBufferBytes))
	}
	if cfg.StreamIdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--stream-idle-timeout %v: must be more than 0", cfg.StreamIdleTimeout))
	}
	if o.simulate {
		errs = append(errs, o.sim.validate())
	}
	errs = append(errs, o.kube.validate(), o.otlp.validate(), o.kubelet.validate(),
		validateFlightRecorder(cfg.FlightRecorder))
	return errors.Join(errs...)
}

// run starts the daemon and serves until a signal stops it.
func (o *runFlags) run(cmd *cobra.Command, g *global) error {
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	// Most of the daemon's heap is the pod cache, which lives as long as
	// the daemon; the default target (GOGC=100) lets the heap grow to
	// twice that between collections. 50 keeps it at one and a half, for a
	// few percent of a core at 10,000 pods.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	// The daemon's log never blocks it (package logsink): in a pod its
	// standard error is a pipe the pod's shim drains, and a shim that
	// stops draining must not stop the daemon that reports it.
	sink := logsink.New(g.stderr, 0)
	defer sink.Close(5 * time.Second)
	g.log = g.logger(sink)
	defer logKlogTo(g.log, g.verbosity)()
	kubeConfig, err := o.kube.config()
	if err != nil {
		return err
	}
	rt, cleanup, err := g.watchedRuntime(ctx, o.simulate, o.sim, 2*time.Minute)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg := o.cfg
	cfg.Runtime, cfg.Generator, cfg.Logger, cfg.Kube = rt, g.generatorOptions(), g.log, kubeConfig
	cfg.LogDropped = sink.Dropped
	if cfg.Kubelet, err = o.kubelet.kubeletSource(kubeletReadTimeout); err != nil {
		return fmt.Errorf("--kubelet: %w", err)
	}
	if node, err := o.kube.node(); err == nil {
		cfg.Diagnosis.Node = node // a bundle's name; the host's name otherwise
	}
	if o.otlp.t.Endpoint != "" {
		node, err := o.kube.node()
		if err != nil {
			return err
		}
		cfg.OTLP = o.otlp.config(node)
	}
	d, err := daemon.New(cfg)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// kubeletReadTimeout bounds one read of the kubelet's metrics: a kubelet
// that does not answer in that time is itself a finding.
const kubeletReadTimeout = 5 * time.Second

// register declares pleg run's flags.
func (o *runFlags) register(f *pflag.FlagSet, g *global) {
	cfg := &o.cfg
	// The kubelet's own PLEG, read every 10 s beside pleg's: a kubelet
	// behind while the runtime answers pleg is the kubelet's problem.
	// "none" by default: on a host, reading the kubelet takes a
	// credential pleg run is not otherwise given; the chart passes auto.
	o.kubelet.register(f, kubeletNone, false)
	f.StringVar(&cfg.Listen, "listen", daemon.DefaultListen, "address of the whole API: host:port, or unix:///path")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", "",
		"address serving only /metrics and the probes /healthz, /readyz, /livez, e.g. on the pod network: "+
			"host:port, or unix:///path")
	f.StringVar(&cfg.Diagnosis.Listen, "diagnosis-listen", "",
		"address serving only /v1/doctor, /v1/bundle and /v1/recordings (the daemon's own diagnosis, the "+
			"support bundle, the flight recordings), for the API server's pod proxy to reach when the runtime "+
			"is hung: host:port, or unix:///path; off by default (see docs/security.md)")
	f.StringVar(&cfg.ListenGroup, "listen-group", "",
		"group (name or number) owning the unix sockets, which are created with mode 0660")
	f.StringVar(&cfg.WebConfigFile, "web-config-file", "",
		"Prometheus exporter web config: TLS, client certificates and basic auth on every listener")
	f.IntVar(&cfg.EventBuffer, "event-buffer", daemon.DefaultEventBuffer, "events kept for clients to resume from, at "+
		"most")
	f.Int64Var(&cfg.EventBufferBytes, "event-buffer-bytes", journal.DefaultMaxBytes,
		"bytes of events kept for clients to resume from, at most, as encoded; the oldest go first")
	f.Var(&retentionFlag{&cfg.EventRetention}, "event-retention",
		"drop events older than this (7d, 168h...) beside --event-buffer and --event-buffer-bytes, whichever "+
			"is reached first; 0 (the default) drops none by age")
	// No state directory unless asked: a pleg run by hand on a node must
	// not take over, or leave behind, the journal of the installed one
	// (the chart and the systemd unit pass --state-dir /var/lib/pleg).
	f.StringVar(&cfg.StateDir, "state-dir", "",
		`directory keeping the journal across restarts (events, sequence numbers, what was last reported `+
			`of each container), e.g. `+daemon.DefaultStateDir+`; "" (the default) keeps it in memory`)
	f.Var(&syncFlag{&cfg.StateSync}, "state-sync",
		`how often the journal's writes are forced to disk: a period, "always" (every change, slower) or `+
			`"never" (left to the OS); a machine that goes down loses at most this much, and clients are told `+
			`of it as a Gap`)
	f.IntVar(&cfg.MaxStreams, "max-streams", api.DefaultMaxStreams, "concurrent /v1/events clients at most")
	f.IntVar(&cfg.MaxStreamsPerClient, "max-streams-per-client", api.DefaultMaxStreamsPerClient,
		"concurrent /v1/events streams of one client at most: an IP address, or a user on a unix socket")
	f.DurationVar(&cfg.StreamIdleTimeout, "stream-idle-timeout", api.DefaultStreamIdleTimeout,
		"end a /v1/events stream that has sent no event for this long")
	f.IntVar(&cfg.Limits.MaxConnections, "max-connections", daemon.DefaultMaxConnections,
		"open connections of each listener at most")
	g.maxListBytes = cri.DefaultMaxListBytes
	f.Var(byteSize{&g.maxListBytes}, "max-list-size",
		"largest answer of the runtime's lists accepted, all its messages together (24Mi, 64Mi...): "+
			"its items and the pod cache grow with it; fit it to the memory limit")
	f.BoolVar(&o.simulate, "simulate", false, "watch an embedded simulated runtime instead of --runtime-endpoint")
	f.BoolVar(&cfg.Profiling, "profiling", false, "serve Go's profiles under /debug/pprof/ on --listen")
	o.sim.register(f, "sim-")
	// Reporting into the Kubernetes API: off unless asked.
	o.kube.register(f)
	// Export to an OpenTelemetry Collector: off unless asked.
	o.otlp.register(f)
	registerFlightRecorder(f, &cfg.FlightRecorder)
}

// syncFlag is --state-sync: a period, "always" or "never".
type syncFlag struct{ d *time.Duration }

func (f *syncFlag) String() string {
	switch {
	case f.d == nil || *f.d == 0:
		return journal.DefaultSync.String()
	case *f.d == journal.SyncAlways:
		return "always"
	case *f.d == journal.SyncNever:
		return "never"
	default:
		return f.d.String()
	}
}

func (f *syncFlag) Set(s string) error {
	switch s {
	case "always":
		*f.d = journal.SyncAlways
	case "never":
		*f.d = journal.SyncNever
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a period such as 1s, always or never")
		}
		*f.d = d
	}
	return nil
}

func (f *syncFlag) Type() string { return "period" }

// retentionFlag is --event-retention: a duration as Prometheus spells its
// retention (7d, 2w, 36h), 0 for none.
type retentionFlag struct{ d *time.Duration }

func (f *retentionFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0"
	}
	return model.Duration(*f.d).String()
}

func (f *retentionFlag) Set(s string) error {
	d, err := model.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 7d or 36h, or 0: %w", err)
	}
	*f.d = time.Duration(d)
	return nil
}

func (f *retentionFlag) Type() string { return "duration" }
