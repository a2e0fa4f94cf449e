// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/sim"
)

// simFlags configure an embedded or served simulated runtime.
type simFlags struct {
	pods, containers int
	exited           int
	churn            string
	latency          string
	seed             uint64
	events           string
	faults           string
	gc               bool
}

// register adds the flags, their names prefixed with prefix.
func (s *simFlags) register(f *pflag.FlagSet, prefix string) {
	f.IntVar(&s.pods, prefix+"pods", 20, "simulated pods")
	f.IntVar(&s.containers, prefix+"containers", 3, "containers per simulated pod")
	f.IntVar(&s.exited, prefix+"exited", 0, "exited containers each simulated pod starts with, as if never collected")
	f.StringVar(&s.churn, prefix+"churn", "crash=0.5,exit=0.2,pods=0.1,short=0.5", "churn rates per second: crash=, "+
		"exit=, pods=, short= (\"\" for none)")
	f.StringVar(&s.latency, prefix+"latency", "seed-node", "latency preset: zero or seed-node")
	f.Uint64Var(&s.seed, prefix+"seed", 1, "seed of the workload: one seed, one history")
	f.StringVar(&s.events, prefix+"events", "containerd", "event stream: containerd, crio or off")
	f.StringVar(&s.faults, prefix+"faults", "", "faults to inject, e.g. error=container_status:0.05,hang-pod=UID,drop=30s")
	f.BoolVar(&s.gc, prefix+"gc", true, "collect exited containers as the kubelet does; false lets them pile up")
}

// options parses the flags into the simulator's options, and checks them
// with the options' own Validate.
func (s *simFlags) options(socket string) (sim.Options, error) {
	var errs []error
	churn, err := sim.ParseChurn(s.churn)
	errs = append(errs, err)
	latency, err := sim.LatencyPreset(s.latency)
	errs = append(errs, err)
	events, err := sim.ParseEventMode(s.events)
	errs = append(errs, err)
	faults, err := sim.ParseFaults(s.faults)
	errs = append(errs, err)
	opts := sim.Options{
		Socket: socket, Pods: s.pods, Containers: s.containers, Exited: s.exited, Churn: churn, Latency: latency,
		Seed: s.seed, Events: events, Faults: faults, GC: s.gc,
	}
	if err := errors.Join(errs...); err != nil {
		return opts, err
	}
	return opts, opts.Validate()
}

func (s *simFlags) validate() error {
	_, err := s.options("")
	return err
}

// watchedRuntime is the runtime a command watches: the CRI runtime at
// --runtime-endpoint, or an embedded simulator served on a private
// socket. cleanup stops what it started.
func (g *global) watchedRuntime(
	ctx context.Context,
	simulate bool,
	s simFlags,
	timeout time.Duration,
) (rt runtime.Runtime, cleanup func(), err error) {
	if !simulate {
		r, err := g.servedRuntime(timeout)
		if err != nil {
			return nil, nil, err
		}
		return r, func() { _ = r.Close() }, nil
	}
	dir, err := os.MkdirTemp("", "pleg-sim-")
	if err != nil {
		return nil, nil, err
	}
	opts, err := s.options(filepath.Join(dir, "cri.sock"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	opts.Logger = g.log
	sm, err := sim.New(opts)
	if err == nil {
		// Not ended with ctx: the daemon stops first, and cleanup then
		// stops the runtime it watched. Stopping both at once fails the
		// relist in flight, which logs errors at every clean stop.
		err = sm.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("simulated runtime: %w", err)
	}
	r, err := g.runtimeAt(sm.Endpoint(), timeout)
	if err != nil {
		_ = sm.Stop()
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	g.log.Info("Watching a simulated runtime", "endpoint", sm.Endpoint(), "pods", opts.Pods, "containers", opts.Containers,
		"churn", s.churn, "latency", s.latency, "seed", s.seed)
	return r, func() {
		_ = r.Close()
		_ = sm.Stop()
		_ = os.RemoveAll(dir)
	}, nil
}

func newSimCommand(g *global) *cobra.Command {
	var (
		socket       string
		registry     string
		cgroupDriver string
		imageFs      string
		reg          sim.Registry
		flags        simFlags
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Serve a simulated CRI runtime on a unix socket, with churn, latency and faults",
		Long: `Sim serves the CRI v1 RuntimeService and ImageService (images as
metadata: any pull succeeds) on --socket, over a simulated node: --pods pods
of --containers containers with the kubelet's labels, changing at the --churn
rates, answering with the --latency preset, and failing as --faults says. The
same --seed gives the same sequence of changes.

  pleg sim --socket /tmp/sim.sock --pods 1000 --latency seed-node &
  pleg run -r unix:///tmp/sim.sock
  crictl -r unix:///tmp/sim.sock pods`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if socket == "" {
				return errors.New("--socket is required")
			}
			if registry != "" {
				var err error
				if reg, err = sim.LoadRegistry(registry); err != nil {
					return fmt.Errorf("--registry: %w", err)
				}
			}
			if err := (sim.Options{CgroupDriver: cgroupDriver}).Validate(); err != nil {
				return fmt.Errorf("--cgroup-driver: %w", err)
			}
			return flags.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			opts, err := flags.options(socket)
			if err != nil {
				return err
			}
			opts.Registry = reg
			opts.CgroupDriver, opts.ImageFsMountpoint = cgroupDriver, imageFs
			opts.Logger = g.log
			s, err := sim.New(opts)
			if err != nil {
				return err
			}
			if err := s.Start(ctx); err != nil {
				return err
			}
			defer func() { _ = s.Stop() }() // on the way out: the run's error is the one to tell
			tick := time.NewTicker(10 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
					st := s.Stats()
					g.log.Info("Simulated runtime", "stats", fmt.Sprintf("%+v", st))
				}
			}
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "unix socket to serve on (required)")
	cmd.Flags().StringVar(&registry, "registry", "", "YAML or JSON file of the simulated registry: image references "+
		"mapped to {digest, user}; references with one digest are one image")
	cmd.Flags().StringVar(&cgroupDriver, "cgroup-driver", sim.CgroupDriverSystemd, "cgroup driver RuntimeConfig reports: "+
		"systemd or cgroupfs (a kubelet takes the runtime's)")
	cmd.Flags().StringVar(&imageFs, "image-fs", sim.DefaultImageFsMountpoint, "mount point ImageFsInfo reports "+
		"(a kubelet on the simulator reads the file system there: give a directory that exists)")
	flags.register(cmd.Flags(), "")
	return cmd
}
