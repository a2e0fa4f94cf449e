// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cli holds the commands of the pleg binary.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

// global holds the flags every command shares.
type global struct {
	endpoint           string
	timeout            time.Duration
	mode               string
	relistPeriod       time.Duration
	relistThreshold    time.Duration
	eventedPeriod      time.Duration
	eventedThreshold   time.Duration
	inspectConcurrency int
	configFile         string
	logFormat          string
	verbosity          int
	// maxListBytes bounds the runtime's list answers (pleg run's
	// --max-list-size); 0 leaves cri's default.
	maxListBytes int
	// candidates are the sockets --runtime-endpoint auto tries.
	candidates []string

	stdout, stderr io.Writer
	log            *slog.Logger
}

// printf writes to the command's standard output. A write that fails
// there has nowhere else to be told, and the command's exit status says
// what matters: the error is dropped.
func (g *global) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(g.stdout, format, args...)
}

// NewCommand returns the pleg command with every subcommand.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	return newCommand(stdout, stderr, autoCandidates())
}

// newCommand is NewCommand with the sockets --runtime-endpoint auto tries.
func newCommand(stdout, stderr io.Writer, candidates []string) *cobra.Command {
	g := &global{stdout: stdout, stderr: stderr, candidates: candidates}
	root := &cobra.Command{
		Use:   "pleg",
		Short: "A pod lifecycle event generator for CRI container runtimes",
		Long: `pleg watches a CRI container runtime (containerd, CRI-O) as the kubelet's PLEG
does: it relists pods, turns container state changes into pod lifecycle
events, keeps a pod status cache and reports its health.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.prepare(cmd)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	f := root.PersistentFlags()
	f.StringVarP(&g.endpoint, "runtime-endpoint", "r", cri.DefaultEndpoint, "CRI runtime endpoint, unix:///path (env "+
		"CONTAINER_RUNTIME_ENDPOINT), or auto: the first of "+strings.Join(autoCandidates(), ", ")+
		" that exists and answers")
	f.DurationVarP(&g.timeout, "timeout", "t", 0, "deadline of each runtime call (default 2m for run, watch and demo; "+
		"10s for the others)")
	f.StringVar(&g.mode, "mode", string(pleg.ModeAuto), "auto (the runtime's event stream where it has one), generic "+
		"(relisting alone) or evented")
	f.DurationVar(&g.relistPeriod, "relist-period", pleg.DefaultRelistPeriod, "pause between global relists")
	f.DurationVar(&g.relistThreshold, "relist-threshold", pleg.DefaultRelistThreshold, "unhealthy after this long "+
		"without a successful relist")
	f.DurationVar(&g.eventedPeriod, "evented-relist-period", pleg.DefaultEventedRelistPeriod, "pause between global "+
		"relists while the runtime's event stream drives")
	f.DurationVar(
		&g.eventedThreshold,
		"evented-relist-threshold",
		pleg.DefaultEventedRelistThreshold,
		"health threshold while the runtime's event stream drives",
	)
	f.IntVar(&g.inspectConcurrency, "inspect-concurrency", pleg.DefaultInspectConcurrency, "pods inspected at once (1: "+
		"the kubelet's serial order)")
	f.StringVar(&g.configFile, "config", "", "YAML file of flag values, keyed by flag name; flags on the command line win")
	f.StringVar(&g.logFormat, "log-format", "text", "text or json")
	f.IntVarP(&g.verbosity, "v", "v", 0, "log verbosity; 4 and up logs every state change, as the kubelet's -v=4")

	root.AddCommand(
		newRunCommand(g),
		newWatchCommand(g),
		newPodsCommand(g),
		newHistoryCommand(g),
		newDemoCommand(g),
		newDoctorCommand(g),
		newSimCommand(g),
		newVersionCommand(g),
		newInstallCommand(g),
		newUninstallCommand(g),
	)
	return root
}

// Execute runs the pleg command with the process's arguments and returns
// the exit code. SIGINT and SIGTERM end the command's context.
func Execute() int {
	ctx, stop := withSignals(context.Background())
	defer stop()
	return execute(ctx, NewCommand(os.Stdout, os.Stderr), os.Stderr)
}

// execute runs cmd and returns the exit code: a command's own exit status;
// 128 plus the signal's number, printing nothing, for a command that a
// signal cut short, as a shell reports it; or 1 for an error, which is printed;
// doctor's errors are 2, as its exit status says.
func execute(ctx context.Context, cmd *cobra.Command, stderr io.Writer) int {
	c, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var status exitStatus
	if errors.As(err, &status) {
		return int(status)
	}
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) {
		if n, ok := sig.signal.(syscall.Signal); ok {
			return 128 + int(n)
		}
	}
	_, _ = fmt.Fprintln(stderr, "pleg:", err) // nowhere else to tell it
	if c != nil && c.Name() == "doctor" {
		return doctorFailed
	}
	return 1
}

// prepare applies the config file and the environment to the flags the
// command line left unset, checks every value and sets up logging, before
// a command starts anything.
func (g *global) prepare(cmd *cobra.Command) error {
	// Precedence: command line, then environment, then config file.
	fromCommandLine := cmd.Flags().Changed("runtime-endpoint")
	if g.configFile != "" {
		if err := applyConfig(cmd, g.configFile); err != nil {
			return err
		}
	}
	if ep := os.Getenv("CONTAINER_RUNTIME_ENDPOINT"); ep != "" && !fromCommandLine {
		g.endpoint = ep
	}
	if err := g.validate(cmd.Flags()); err != nil {
		return err
	}
	g.log = g.logger(g.stderr)
	return nil
}

// logger is a logger writing to w in --log-format at -v's level.
func (g *global) logger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if g.verbosity >= 4 {
		level = slog.LevelDebug
	}
	hopts := &slog.HandlerOptions{Level: level}
	if g.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}

// validate checks the flags that are the command line's own, and the
// generator's options through their own Validate.
func (g *global) validate(fs *pflag.FlagSet) error {
	var errs []error
	if _, err := cri.Target(g.endpoint); err != nil && g.endpoint != autoEndpoint {
		errs = append(errs, fmt.Errorf("--runtime-endpoint: %w", err))
	}
	if fs.Changed("timeout") && g.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %v: must be positive (leave it out for the command's default)", g.timeout))
	}
	errs = append(
		errs,
		notZero(
			fs,
			"relist-period",
			"relist-threshold",
			"evented-relist-period",
			"evented-relist-threshold",
			"inspect-concurrency",
		),
	)
	errs = append(errs, oneOf("log-format", g.logFormat, "text", "json"))
	if g.verbosity < 0 {
		errs = append(errs, fmt.Errorf("-v %d: must be 0 or more", g.verbosity))
	}
	errs = append(errs, g.generatorOptions().Validate())
	return errors.Join(errs...)
}

// notZero refuses 0 for flags whose options read 0 as "the default": on
// the command line the default is what the flag shows, and 0 is not a way
// to ask for it. Other values are the options' to judge.
func notZero(fs *pflag.FlagSet, names ...string) error {
	var errs []error
	for _, name := range names {
		if f := fs.Lookup(name); f != nil {
			if v := f.Value.String(); v == "0" || v == "0s" {
				errs = append(errs, fmt.Errorf("--%s %s: must be positive", name, v))
			}
		}
	}
	return errors.Join(errs...)
}

// runtime returns the CRI runtime at --runtime-endpoint, with each call's
// deadline the --timeout or def. With auto it finds it first, or fails
// saying what each candidate answered; the endpoint found is then the one
// every message names.
func (g *global) runtime(def time.Duration) (*cri.Runtime, error) {
	if g.endpoint != autoEndpoint {
		return g.runtimeAt(g.endpoint, def)
	}
	rt, err := g.auto(def).runtime(context.Background())
	if err != nil {
		return nil, err
	}
	g.endpoint = rt.Endpoint()
	return rt, nil
}

// doctorRuntime is the runtime pleg doctor diagnoses: with auto, the one
// found, or else the first candidate whose socket exists, so that a
// runtime that is hung or stopped is diagnosed, not passed over.
func (g *global) doctorRuntime(def time.Duration) (*cri.Runtime, error) {
	rt, err := g.runtime(def)
	if err == nil || g.endpoint != autoEndpoint {
		return rt, err
	}
	ep := present(g.candidates)
	if ep == "" {
		return nil, err
	}
	g.log.Warn("--runtime-endpoint auto: no runtime answers; diagnosing the first socket there", "endpoint", ep,
		"err", err)
	g.endpoint = ep
	return g.runtimeAt(ep, def)
}

// servedRuntime is the runtime of a command that runs until stopped: it
// tells its version, for waiting on it, and closes.
type servedRuntime interface {
	runtime.Runtime
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	Close() error
}

// servedRuntime returns the runtime for pleg run and pleg watch: with auto,
// one that keeps looking for the runtime until one answers, so that a
// runtime down at start is waited for (an unhealthy PLEG that recovers),
// never a failed start.
func (g *global) servedRuntime(def time.Duration) (servedRuntime, error) {
	if g.endpoint == autoEndpoint {
		return g.auto(def), nil
	}
	return g.runtime(def)
}

// auto returns the runtime that --runtime-endpoint auto finds.
func (g *global) auto(def time.Duration) *autoRuntime {
	return newAutoRuntime(g.candidates, func(ep string) (*cri.Runtime, error) { return g.runtimeAt(ep, def) }, g.log)
}

func (g *global) runtimeAt(endpoint string, def time.Duration) (*cri.Runtime, error) {
	timeout := g.timeout
	if timeout == 0 {
		timeout = def
	}
	return cri.New(cri.Options{Endpoint: endpoint, RequestTimeout: timeout, Logger: g.log,
		MaxRecvMsgSize: g.maxListBytes, MaxListBytes: g.maxListBytes})
}

// generatorOptions are the generator's options from the flags.
func (g *global) generatorOptions() pleg.Options {
	return pleg.Options{
		RelistPeriod:           g.relistPeriod,
		RelistThreshold:        g.relistThreshold,
		Mode:                   pleg.Mode(g.mode),
		EventedRelistPeriod:    g.eventedPeriod,
		EventedRelistThreshold: g.eventedThreshold,
		InspectConcurrency:     g.inspectConcurrency,
		Logger:                 g.log,
	}
}

// signalContext is ctx ended by SIGINT or SIGTERM. Execute already ends
// every command's context so; this is for a command that must also stop
// when run from NewCommand alone.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// interrupted is the cause of a context that a signal ended.
type interrupted struct{ signal os.Signal }

func (i interrupted) Error() string { return i.signal.String() + " received" }

// withSignals is parent ended by the first SIGINT or SIGTERM, with that
// signal as its cause. A second signal is not caught: it kills the
// process, so that a command slow to stop can still be stopped.
func withSignals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			cancel(interrupted{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
	}
}

// oneOf checks a flag value against its choices.
func oneOf(flag, value string, choices ...string) error {
	if slices.Contains(choices, value) {
		return nil
	}
	return fmt.Errorf("--%s %q: want %s", flag, value, strings.Join(choices, ", "))
}
