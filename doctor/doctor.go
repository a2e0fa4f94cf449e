// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package doctor diagnoses why a node's pod lifecycle event generator is,
// or may become, unhealthy: the diagnosis an operator does by hand when a
// node goes NotReady with "PLEG is not healthy", in one call.
//
// It asks the CRI runtime what a kubelet's relist asks, times every call,
// counts what the runtime holds, projects the relist against the kubelet's
// period and health threshold, and turns what it saw into ranked findings,
// each with its evidence and an action. It never changes the runtime: it
// calls Version, Status, the list and status RPCs and opens the event
// stream, nothing else. It keeps to a time budget, so that a hung runtime
// is diagnosed rather than waited for.
//
// With Options.Node it also reads the node below the CRI, with the flight
// recorder's probes (the runtime's processes, its shims, the OCI
// runtimes and CNI plugins they run, the kubelet and its own PLEG, the
// host's pressure, memory, PIDs, mounts and kernel log), and names the
// cause in its first finding: a stopped runtime or shim, a hung mount,
// PIDs exhausted, a CNI plugin that does not end, a starved runtime or
// kubelet, before the symptoms seen through the CRI.
//
// Where each part lives: the collection (what is asked and timed) in
// collect.go, summarize.go and daemon.go; the rules (what the figures mean,
// the findings and the verdict) in assess.go and the files it names, the
// node's in node*.go, shared with flight recordings (recording.go), the
// ranking in rank.go, the runtimes' tools in runtimes.go; the report's
// types in report.go. Package render writes a report as text, JSON or
// HTML.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg"
	apiclient "github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/flightrec"
)

// Defaults of Options.
const (
	DefaultBudget      = 60 * time.Second
	DefaultCallTimeout = 10 * time.Second
	DefaultListSamples = 5
	DefaultConcurrency = 1
	// DefaultRuntimeRequestTimeout is the kubelet's
	// --runtime-request-timeout: what a hung call costs its relist.
	DefaultRuntimeRequestTimeout = 2 * time.Minute
)

// AlertThreshold is where the stock KubeletPlegDurationHigh alert fires:
// p99 of the relist duration at or above 10 s for 5 minutes.
const AlertThreshold = 10 * time.Second

// Options configure a diagnosis. The zero value is the default diagnosis.
type Options struct {
	// Endpoint is the runtime's endpoint, for the report.
	Endpoint string
	// Budget bounds the whole diagnosis; default 60 s. Pods left when it
	// runs out are not inspected and the projections are extrapolated
	// from those that were.
	Budget time.Duration
	// CallTimeout bounds each call; a call without an answer by then is
	// reported hung. Default 10 s, and at most a quarter of the budget, so
	// that a hang is seen within it.
	CallTimeout time.Duration
	// Sample inspects that many pods, spread over the node, instead of
	// all; 0 inspects all.
	Sample int
	// Concurrency is how many pods are inspected at once; default 1, the
	// kubelet's way, which times each call as the kubelet sees it. More
	// goes faster on a big node but loads the runtime and inflates what
	// is measured.
	Concurrency int
	// ListSamples is how many times each whole-node list is timed;
	// default 5.
	ListSamples int

	// RelistPeriod and RelistThreshold are the kubelet's relist period
	// and health threshold the projection is held against; default 1 s
	// and 3 m.
	RelistPeriod    time.Duration
	RelistThreshold time.Duration
	// RuntimeRequestTimeout is the kubelet's deadline per runtime call;
	// default 2 m.
	RuntimeRequestTimeout time.Duration
	// PlegConcurrency and PlegInspectTimeout are pleg's inspection
	// concurrency and per-pod deadline, for its projection; default
	// pleg's defaults.
	PlegConcurrency    int
	PlegInspectTimeout time.Duration

	// Daemon reads a running pleg daemon's health and relist figures, or
	// is nil.
	Daemon *apiclient.Client
	// DaemonView is the daemon's part of the report made by the caller:
	// the daemon's own diagnosis reads itself in process (DaemonOf), not
	// over HTTP. Daemon and Server are then not read.
	DaemonView *Daemon
	// Server is the address of a daemon to read when Daemon is nil:
	// http://host:port, https://host:port or unix:///path, with no TLS
	// settings or credentials.
	Server string

	// Node, if set, reads the node below the CRI while the runtime is
	// diagnosed: the runtime's processes and what they run, the kubelet
	// and its own PLEG, the host's pressure, memory, PIDs, mounts and
	// kernel log (a *flightrec.NodeProbe). Its findings join the report's,
	// drawn by the same code as a flight recording's.
	Node NodeProber

	// Clock times calls; default the real clock.
	Clock clock.PassiveClock
}

// Validate reports every field that Diagnose would refuse, reading a
// zero field as its default.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

func (o Options) withDefaults() (Options, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Budget, DefaultBudget)
	def(&o.CallTimeout, DefaultCallTimeout)
	def(&o.RelistPeriod, pleg.DefaultRelistPeriod)
	def(&o.RelistThreshold, pleg.DefaultRelistThreshold)
	def(&o.RuntimeRequestTimeout, DefaultRuntimeRequestTimeout)
	def(&o.PlegInspectTimeout, pleg.DefaultInspectTimeout)
	o.CallTimeout = min(o.CallTimeout, o.Budget/4)
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ListSamples == 0 {
		o.ListSamples = DefaultListSamples
	}
	if o.PlegConcurrency == 0 {
		o.PlegConcurrency = pleg.DefaultInspectConcurrency
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"budget", o.Budget},
		{"call timeout", o.CallTimeout},
		{"relist period", o.RelistPeriod},
		{"relist threshold", o.RelistThreshold},
		{"runtime request timeout", o.RuntimeRequestTimeout},
		{"pleg inspect timeout", o.PlegInspectTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"sample", o.Sample},
		{"concurrency", o.Concurrency},
		{"list samples", o.ListSamples},
		{"pleg concurrency", o.PlegConcurrency},
	} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("%s %d must not be negative", n.name, n.v))
		}
	}
	return o, errors.Join(errs...)
}

// Diagnose diagnoses the runtime behind client within opts.Budget and
// returns the report. A runtime that does not answer is a diagnosis, not
// an error: the error is for invalid options only. Cancelling ctx ends the
// diagnosis early with what was gathered.
func Diagnose(ctx context.Context, client runtimeapi.RuntimeServiceClient, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := newDiagnosis(client, opts)
	ctx, cancel := context.WithDeadline(ctx, d.deadline)
	defer cancel()

	daemon := make(chan *Daemon, 1)
	switch {
	case opts.DaemonView != nil:
		daemon <- opts.DaemonView
	case opts.Daemon != nil:
		// Read at once and apart: the daemon's answer does not depend on
		// ours, and it must not eat the inspection's budget.
		go func() { daemon <- readDaemon(ctx, opts.Daemon, opts.Clock) }()
	case opts.Server != "":
		c, err := apiclient.New(opts.Server, apiclient.Options{})
		if err != nil {
			daemon <- &Daemon{URL: opts.Server, Error: err.Error()}
			break
		}
		go func() { daemon <- readDaemon(ctx, c, opts.Clock) }()
	default:
		daemon <- nil
	}

	node := make(chan *flightrec.Recording, 1)
	if opts.Node != nil {
		// Beside the CRI calls, which it must not wait for: a runtime that
		// hangs is what the node's view explains.
		go func() { node <- opts.Node.Snapshot(ctx) }()
	} else {
		node <- nil
	}
	d.run(ctx)
	d.rep.Daemon = <-daemon
	d.rep.Node = <-node
	d.rep.DurationSeconds = seconds(d.clock.Since(d.started))
	assess(d.rep)
	return d.rep, nil
}
