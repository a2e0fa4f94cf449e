// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package runtimecheck asks the container runtime for its Status every
// few seconds, as the kubelet's runtime check does, and tells since when
// the runtime has gone without answering.
//
// The generator alone cannot tell a quiet node from a hung runtime: while
// the event stream drives, its global relist runs every 30 s, and nothing
// else asks the runtime anything on a node where nothing changes. The
// kubelet, meanwhile, asks for the runtime's Status every 5 s and turns
// the node NotReady a little over two minutes after a hang (measured on
// containerd 2.4 and kubelet 1.37). So that pleg sees the hang as early
// as the kubelet does, and pages before the node goes NotReady, the check
// keeps one Status call going at that pace: one at a time, so that a
// runtime that does not answer is never sent a pile of calls.
package runtimecheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Defaults of Config.
const (
	// DefaultPeriod is the kubelet's: it asks for the runtime's Status
	// every 5 s.
	DefaultPeriod = 5 * time.Second
	// DefaultTimeout is the kubelet's --runtime-request-timeout: a call
	// is given up after it, and the next one starts.
	DefaultTimeout = 2 * time.Minute
)

// Unanswered is how long the runtime may go without answering before it
// counts as not answering: a healthy runtime answers Status in a
// millisecond, a restarting one within a few seconds; a runtime silent
// for 20 s is hung, and the kubelet, on its own check, turns the node
// NotReady some two minutes after the hang began. The node condition and
// the PlegRuntimeNotAnswering alert share it.
const Unanswered = 20 * time.Second

// Slow is the typical time of a Status answer past which the runtime
// counts as starved: a healthy runtime answers in milliseconds; one
// confined to a sliver of CPU answered in 3 to 4 s, now and then 20,
// for minutes before the kubelet, which waits 30 s for an answer, turned
// the node NotReady. The node condition's RuntimeSlow and the
// PlegRuntimeSlow alert share it.
const Slow = 2 * time.Second

// latencies is how many of the last answers the typical one is the
// median of: a minute of them at DefaultPeriod, so that one slow answer
// on a busy node does not count.
const latencies = 5

// StatusGetter is the one call the check makes; the CRI adapter
// (runtime/cri) has it.
type StatusGetter interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// Config configures a Check. Runtime is required.
type Config struct {
	Runtime StatusGetter
	// Period is the pause between the end of one call and the start of
	// the next (DefaultPeriod); Timeout bounds a call (DefaultTimeout).
	Period  time.Duration
	Timeout time.Duration
	// Clock and Logger default to the real clock and slog.Default().
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Condition is one of the conditions the runtime reports in its Status:
// RuntimeReady and NetworkReady, which the kubelet reads.
type Condition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

// State is what the check knows of the runtime.
type State struct {
	// LastAnswer is when the runtime last answered a Status call; zero
	// before it ever did.
	LastAnswer time.Time
	// UnansweredSince is the start of the first call the runtime has not
	// answered since its last answer: the call in flight, or the first of
	// those that failed since. Zero while the runtime answers.
	UnansweredSince time.Time
	// Unanswered names the calls UnansweredSince is about, for a person:
	// "its Status" for the check's own; whoever merges other calls into
	// the state names them.
	Unanswered string
	// InFlight tells that a call is waiting for its answer now.
	InFlight bool
	// Err is why the last call failed; nil after an answer.
	Err error
	// Conditions are those of the last answer.
	Conditions []Condition
	// Latency is the median time of the last answers (up to 5), zero
	// before three; it counts answers only: a call that is not
	// answered is UnansweredSince's.
	Latency time.Duration
}

// IsSlow tells whether the runtime's answers typically take Slow or more.
func (s State) IsSlow() bool { return s.Latency >= Slow }

// NotAnswering tells whether, at now, the runtime has gone without
// answering for Unanswered, and since when.
func (s State) NotAnswering(now time.Time) (bool, time.Time) {
	if s.UnansweredSince.IsZero() {
		return false, time.Time{}
	}
	return now.Sub(s.UnansweredSince) >= Unanswered, s.UnansweredSince
}

// NotReady returns the first of the conditions the kubelet reads,
// RuntimeReady and NetworkReady, that the runtime reports false, if any.
// A runtime reports others (containerd 2.x: its deprecation warnings),
// which the kubelet ignores.
func (s State) NotReady() (Condition, bool) {
	for _, c := range s.Conditions {
		if !c.Status && (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) {
			return c, true
		}
	}
	return Condition{}, false
}

// Check is the runtime check. Its methods are safe for concurrent use.
type Check struct {
	cfg Config

	mu    sync.Mutex
	state State
	// took are the times of the last answers, oldest first.
	took []time.Duration
}

// New returns a check over cfg.Runtime. It asks nothing until Run.
func New(cfg Config) (*Check, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("runtimecheck: no runtime")
	}
	if cfg.Period < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("runtimecheck: negative period %v or timeout %v", cfg.Period, cfg.Timeout)
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Check{cfg: cfg}, nil
}

// State returns what the check knows now. It never waits for the runtime.
func (c *Check) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	s.Conditions = append([]Condition(nil), s.Conditions...)
	return s
}

// Run asks for the runtime's Status until ctx ends: the first call at
// once, each next one Period after the last returned.
func (c *Check) Run(ctx context.Context) {
	for {
		c.once(ctx)
		t := c.cfg.Clock.NewTimer(c.cfg.Period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// once makes one Status call and records how it went.
func (c *Check) once(ctx context.Context) {
	start := c.cfg.Clock.Now()
	c.mu.Lock()
	if c.state.UnansweredSince.IsZero() {
		c.state.UnansweredSince, c.state.Unanswered = start, "its Status"
	}
	c.state.InFlight = true
	c.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	resp, err := c.cfg.Runtime.Status(cctx, false)
	cancel()
	if ctx.Err() != nil {
		// Stopping: a call cut short says nothing of the runtime.
		c.mu.Lock()
		c.state.InFlight = false
		c.mu.Unlock()
		return
	}
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.InFlight = false
	if err != nil {
		if c.state.Err == nil {
			c.cfg.Logger.Warn("The runtime's Status call failed", "since", c.state.UnansweredSince, "err", err)
		}
		c.state.Err = err
		return
	}
	if c.state.Err != nil {
		c.cfg.Logger.Info("The runtime answers its Status call again",
			"unanswered", now.Sub(c.state.UnansweredSince).Round(time.Millisecond))
	}
	c.state.LastAnswer, c.state.UnansweredSince, c.state.Unanswered, c.state.Err = now, time.Time{}, "", nil
	c.state.Conditions = conditions(resp)
	c.took = append(c.took, now.Sub(start))
	if len(c.took) > latencies {
		c.took = c.took[1:]
	}
	c.state.Latency = median(c.took)
}

// median is the middle of ds once there are three of them, else zero.
func median(ds []time.Duration) time.Duration {
	if len(ds) < 3 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// conditions are the runtime's conditions in its answer.
func conditions(resp *runtimeapi.StatusResponse) []Condition {
	var out []Condition
	for _, rc := range resp.GetStatus().GetConditions() {
		if rc == nil {
			continue
		}
		out = append(out, Condition{Type: rc.GetType(), Status: rc.GetStatus(), Reason: rc.GetReason(),
			Message: rc.GetMessage()})
	}
	return out
}
