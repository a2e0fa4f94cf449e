// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/internal/trace"
	"github.com/plegkit/pleg/runtime"
)

// The kubelet's values, and ours where the kubelet has none.
const (
	// DefaultRelistPeriod is the pause between the end of one global relist
	// and the start of the next (kubelet: genericPlegRelistPeriod).
	DefaultRelistPeriod = time.Second
	// DefaultRelistThreshold is how long after the start of the last
	// successful relist the generator reports itself unhealthy (kubelet:
	// genericPlegRelistThreshold).
	DefaultRelistThreshold = 3 * time.Minute
	// DefaultChannelCapacity is the capacity of the Watch channel (kubelet:
	// plegChannelCapacity).
	DefaultChannelCapacity = 1000
	// DefaultInspectConcurrency is how many pods are inspected at once; the
	// kubelet inspects one at a time. Where status calls wait on the
	// runtime, speed grows with concurrency: on the simulator with the
	// seed-node latencies (status calls of 5 to 30 ms), 1,000 changed pods
	// take 48 s at 1, 6.0 s at 8 and 1.6 s at 32 (BenchmarkSeedNodeChangedPods
	// in sim). Where they burn the runtime's CPU it levels off early and
	// costs nothing more: on containerd with 2 cores, 50 changed pods take
	// 57 ms at 1, 22 ms at 8 and 18 ms at 32 (BenchmarkContainerd in
	// test/e2e). 32 takes the first gain and bounds the calls in flight.
	DefaultInspectConcurrency = 32
	// DefaultInspectTimeout bounds the inspection of one pod. The kubelet
	// has none: one pod whose status calls hang for the 2 minute runtime
	// request timeout, twice, stalls the relist past its 3 minute threshold
	// and takes the node NotReady. Inspections take milliseconds; 10 s is
	// a thousand times that and leaves a stuck pod unable to delay the
	// other pods' events by more than 10 s a relist.
	DefaultInspectTimeout = 10 * time.Second
	// DefaultEventedRelistPeriod is the pause between global relists while
	// the CRI event stream holds and drives per-pod relists: the relist is
	// then only a safety net, for what a stream can lose (a runtime that
	// drops events under load), and bounds how long such a loss goes
	// unnoticed. Events arrive within milliseconds whatever this period;
	// what it sets is the idle cost: watching 100 idle simulated pods for
	// 5 minutes took 0.90 s of CPU relisting every second, 0.10 s at 10 s
	// and 0.05 s at 30 s (BenchmarkIdleCPU100Pods in daemon). The
	// kubelet's classic EventedPLEG relisted every 300 s.
	DefaultEventedRelistPeriod = 30 * time.Second
	// DefaultEventedRelistThreshold is the health threshold while events
	// drive (kubelet: eventedPlegRelistThreshold).
	DefaultEventedRelistThreshold = 10 * time.Minute
)

// Mode is how the generator learns of changes.
type Mode string

const (
	// ModeAuto uses the runtime's container event stream where the
	// runtime has one and it holds, and relists alone elsewhere.
	ModeAuto Mode = "auto"
	// ModeGeneric relists alone, as the kubelet's generic PLEG.
	ModeGeneric Mode = "generic"
	// ModeEvented uses the event stream and counts its absence as a fault:
	// it keeps retrying the stream at its usual pace and reports itself
	// unhealthy once the stream has been down for RelistThreshold.
	ModeEvented Mode = "evented"
)

// Cache is what the generator writes pod statuses into. podcache.Cache is
// the implementation; the interface lets embedders wrap it.
type Cache interface {
	// Get returns the cached status of a pod.
	Get(uid string) (*runtime.PodStatus, error)
	// Set stores a pod's status observed at ts and reports whether it was
	// stored; a cache refuses a status older than the one it holds.
	Set(uid string, status *runtime.PodStatus, err error, ts time.Time) bool
	// SetObservedTime records that a pod was seen unchanged at ts.
	SetObservedTime(uid string, ts time.Time)
	// Delete removes a pod that is gone.
	Delete(uid string)
	// UpdateTime records that every pod's entry is at least as new as ts.
	UpdateTime(ts time.Time)
}

// Options configure a Generator. The zero value gives the kubelet's
// behaviour, with parallel inspection and a per-pod inspection deadline.
type Options struct {
	// RelistPeriod is the pause between global relists; default 1 s.
	RelistPeriod time.Duration
	// RelistThreshold is how long the generator may go without a successful
	// relist before Healthy reports false; default 3 m. It must exceed
	// RelistPeriod.
	RelistThreshold time.Duration
	// ChannelCapacity is the capacity of the channel Watch returns; default
	// 1000.
	ChannelCapacity int
	// InspectConcurrency is how many changed pods are inspected at once;
	// default 32. 1 inspects and delivers pod after pod, as the kubelet does.
	InspectConcurrency int
	// InspectTimeout bounds the inspection of one pod; default 10 s. A pod
	// whose inspection times out is inspected again at the next relist.
	InspectTimeout time.Duration

	// Mode chooses relisting alone or with the runtime's event stream;
	// default ModeAuto. In evented operation each event's payload is
	// applied at once and a relist of its pod confirms it; an event whose
	// payload cannot be applied triggers that relist alone.
	Mode Mode
	// EventedRelistPeriod is the pause between global relists while the
	// event stream holds; default 30 s.
	EventedRelistPeriod time.Duration
	// EventedRelistThreshold is the health threshold while the event
	// stream holds; default 10 m.
	EventedRelistThreshold time.Duration
	// NoStreamRetry is how often ModeAuto tries again the stream of a
	// runtime that has none; default 5 m.
	NoStreamRetry time.Duration
	// HintOnly takes every event as a hint for a relist of its pod and
	// ignores its payload, which is otherwise applied at once, the relist
	// then confirming it. Events then arrive a relist of the pod later.
	// For comparing the two, or for a runtime whose payloads are not to be
	// trusted.
	HintOnly bool

	// Cache receives every pod's status; default a new podcache.Cache.
	Cache Cache
	// Store keeps what the generator reports, to carry on from it when
	// started again; default a new MemoryStore, which keeps it for the
	// process's life. Package journal keeps it on disk, across restarts.
	Store Store
	// Clock drives relists, deadlines and timestamps; default the real clock.
	Clock clock.WithDelayedExecution
	// Logger receives the generator's logs; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the generator's metrics; default none.
	Registerer prometheus.Registerer

	// Trace, when set, is told as each event passes the stages of
	// internal/trace, for pleg's own benchmarks to break an event's
	// latency down. Its type is internal: outside this module it can only
	// be left nil, which costs a nil check per stage.
	Trace trace.Func
}

// Validate reports every field that New would refuse, reading a zero
// field as its default.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// withDefaults fills in unset fields and checks the result.
func (o Options) withDefaults() (Options, error) {
	o = o.defaulted()
	return o, o.validate()
}

// defaulted is o with its unset fields set to their defaults.
func (o Options) defaulted() Options {
	if o.RelistPeriod == 0 {
		o.RelistPeriod = DefaultRelistPeriod
	}
	if o.RelistThreshold == 0 {
		o.RelistThreshold = DefaultRelistThreshold
	}
	if o.ChannelCapacity == 0 {
		o.ChannelCapacity = DefaultChannelCapacity
	}
	if o.InspectConcurrency == 0 {
		o.InspectConcurrency = DefaultInspectConcurrency
	}
	if o.InspectTimeout == 0 {
		o.InspectTimeout = DefaultInspectTimeout
	}
	if o.Mode == "" {
		o.Mode = ModeAuto
	}
	if o.EventedRelistPeriod == 0 {
		o.EventedRelistPeriod = DefaultEventedRelistPeriod
	}
	if o.EventedRelistThreshold == 0 {
		o.EventedRelistThreshold = DefaultEventedRelistThreshold
	}
	if o.NoStreamRetry == 0 {
		o.NoStreamRetry = 5 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// validate checks options whose defaults are set.
func (o Options) validate() error {
	var errs []error
	if o.RelistPeriod < 0 {
		errs = append(errs, fmt.Errorf("relist period %v must be positive", o.RelistPeriod))
	}
	if o.RelistThreshold <= o.RelistPeriod {
		errs = append(
			errs,
			fmt.Errorf("relist threshold %v must be greater than the relist period %v", o.RelistThreshold, o.RelistPeriod),
		)
	}
	if o.ChannelCapacity < 0 {
		errs = append(errs, fmt.Errorf("channel capacity %d must be positive", o.ChannelCapacity))
	}
	if o.InspectConcurrency < 0 {
		errs = append(errs, fmt.Errorf("inspect concurrency %d must be positive", o.InspectConcurrency))
	}
	if o.InspectTimeout < 0 {
		errs = append(errs, fmt.Errorf("inspect timeout %v must be positive", o.InspectTimeout))
	}
	switch o.Mode {
	case ModeAuto, ModeGeneric, ModeEvented:
	default:
		errs = append(errs, fmt.Errorf("mode %q: want auto, generic or evented", o.Mode))
	}
	if o.EventedRelistPeriod < 0 {
		errs = append(errs, fmt.Errorf("evented relist period %v must be positive", o.EventedRelistPeriod))
	}
	if o.EventedRelistThreshold <= o.EventedRelistPeriod {
		errs = append(
			errs,
			fmt.Errorf(
				"evented relist threshold %v must be greater than the evented relist period %v",
				o.EventedRelistThreshold,
				o.EventedRelistPeriod,
			),
		)
	}
	return errors.Join(errs...)
}
