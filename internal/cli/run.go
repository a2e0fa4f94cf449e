package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg/daemon"
)

func newRunCommand(g *global) *cobra.Command {
	var (
		listen      string
		eventBuffer int
		maxStreams  int
		simulate    bool
		profiling   bool
		sim         simFlags
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the node daemon: watch the runtime and serve health, metrics, pods and events over HTTP",
		Long: `Run watches the runtime at --runtime-endpoint and serves, on --listen:

  GET /healthz          200 "ok", or 500 "PLEG is not healthy: <reason>"
  GET /metrics          Prometheus metrics, with the kubelet's PLEG metric names
  GET /v1/pods          the pod status cache as JSON; /v1/pods/{uid} one pod
  GET /v1/events        live events, a JSON object a line (or Server-Sent Events
                        with Accept: text/event-stream); filters pod, namespace,
                        type; resume with since=SEQ or Last-Event-ID

With --simulate it watches an embedded simulated runtime instead.

The daemon sets Go's garbage collection target to 50 (GOGC=50) unless the
GOGC environment variable says otherwise; GOMEMLIMIT is honoured.`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var errs []error
			if eventBuffer < 1 {
				errs = append(errs, fmt.Errorf("--event-buffer %d: must be at least 1", eventBuffer))
			}
			if maxStreams < 1 {
				errs = append(errs, fmt.Errorf("--max-streams %d: must be at least 1", maxStreams))
			}
			if simulate {
				errs = append(errs, sim.validate())
			}
			return errors.Join(errs...)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			// Most of the daemon's heap is the pod cache, which lives as
			// long as the daemon; the default target (GOGC=100) lets the
			// heap grow to twice that between collections. 50 keeps it at
			// one and a half, for a few percent of a core at 10,000 pods.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(50)
			}
			rt, cleanup, err := g.watchedRuntime(ctx, simulate, sim, 2*time.Minute)
			if err != nil {
				return err
			}
			defer cleanup()
			d, err := daemon.New(daemon.Config{
				Runtime:     rt,
				Generator:   g.generatorOptions(),
				Listen:      listen,
				EventBuffer: eventBuffer,
				MaxStreams:  maxStreams,
				Profiling:   profiling,
				Logger:      g.log,
			})
			if err != nil {
				return err
			}
			return d.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", daemon.DefaultListen, "address of the API: host:port, or unix:///path")
	f.IntVar(&eventBuffer, "event-buffer", daemon.DefaultEventBuffer, "events kept for clients to resume from")
	f.IntVar(&maxStreams, "max-streams", 64, "concurrent /v1/events clients at most")
	f.BoolVar(&simulate, "simulate", false, "watch an embedded simulated runtime instead of --runtime-endpoint")
	f.BoolVar(&profiling, "profiling", false, "serve Go's profiles under /debug/pprof/ on --listen")
	sim.register(f, "sim-")
	return cmd
}
