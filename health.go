// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plegkit/pleg/internal/stream"
)

// Status describes how the generator learns of changes at the moment, and
// how its relisting fares. It never calls the runtime.
type Status struct {
	// Mode is the configured mode.
	Mode Mode
	// Evented tells that the event stream holds and drives relists.
	Evented bool
	// StreamConnected and StreamSince: whether the event stream is up, and
	// since when it is up or down; zero without a stream.
	StreamConnected bool
	StreamSince     time.Time
	// StreamError is what ended the stream last, if it is down.
	StreamError error
	// NoStream tells that the runtime has no event stream.
	NoStream bool
	// UntoldRemovals are the kinds of removal, "pod" or "container", the
	// connected stream is taken not to tell (CRI-O sends no event when a
	// pod is removed): exited sandboxes or containers are then listed
	// every second to find them.
	UntoldRemovals []string
	// RelistPeriod and RelistThreshold are those in force.
	RelistPeriod    time.Duration
	RelistThreshold time.Duration

	// LastRelist is the start of the last successful global relist; zero
	// before the first.
	LastRelist time.Time
	// RelistInFlightSince is the start of the global relist running; zero
	// when none runs. A relist that hangs shows here before it returns.
	RelistInFlightSince time.Time
	// ListFailingSince is when the runtime's lists, global or of one pod,
	// started failing; zero while they succeed. ListError is the latest
	// failure.
	ListFailingSince time.Time
	ListError        error
	// FailingPods are the pods whose latest inspection failed, the oldest
	// failure first.
	FailingPods []PodFailure
}

// String is a line for humans about the mode, e.g. for a health page.
func (s Status) String() string {
	switch {
	case s.Mode == ModeGeneric:
		return fmt.Sprintf("mode generic: relisting every %v", s.RelistPeriod)
	case s.Evented && len(s.UntoldRemovals) > 0:
		return fmt.Sprintf(
			"mode %s: evented, the container event stream connected since %s; safety-net relist every %v; "+
				"it does not tell %s removals, which a list of exited items every %v finds",
			s.Mode,
			s.StreamSince.UTC().Format(time.RFC3339),
			s.RelistPeriod,
			strings.Join(s.UntoldRemovals, " and "),
			stream.RemovalPollPeriod,
		)
	case s.Evented:
		return fmt.Sprintf("mode %s: evented, the container event stream connected since %s; safety-net relist every %v",
			s.Mode, s.StreamSince.UTC().Format(time.RFC3339), s.RelistPeriod)
	case s.NoStream:
		return fmt.Sprintf("mode %s: relisting every %v; the runtime has no container event stream", s.Mode, s.RelistPeriod)
	case s.StreamConnected:
		return fmt.Sprintf("mode %s: relisting every %v; the container event stream connected at %s and drives once it has "+
			"held for %v",
			s.Mode, s.RelistPeriod, s.StreamSince.UTC().Format(time.RFC3339), stream.Hold)
	default:
		return fmt.Sprintf("mode %s: relisting every %v; the container event stream is down since %s: %v",
			s.Mode, s.RelistPeriod, s.StreamSince.UTC().Format(time.RFC3339), s.StreamError)
	}
}

// InForce is the mode in force: ModeEvented while the event stream drives,
// else ModeGeneric.
func (s Status) InForce() Mode {
	if s.Evented {
		return ModeEvented
	}
	return ModeGeneric
}

// HealthCheck is a named health check, as the kubelet registers them with
// its runtime state; a failing one reads "<Name> is not healthy: <error>".
// Healthy must be cheap and must not call the runtime: it runs before
// every dispatch of a sync loop and for every health probe.
type HealthCheck struct {
	Name    string
	Healthy func() (bool, error)
}

// PodFailure is a pod the runtime could not inspect: its events wait, and
// it is inspected again at every relist until it can be.
type PodFailure struct {
	UID, Name, Namespace string
	// Since is when its inspections started failing.
	Since time.Time
	// Deadline tells that the latest inspection passed InspectTimeout: a
	// status call of the pod hangs, or is that slow.
	Deadline bool
	// Err is the latest inspection's error.
	Err error
}

// Hung tells a pod whose status calls do not answer: its inspection passed
// the generator's deadline, or a call passed its own (the runtime client's
// request timeout, when that is the shorter). The kubelet, which waits two
// minutes for each such call in its relist, is then at risk.
func (f PodFailure) Hung() bool {
	return f.Deadline || status.Code(f.Err) == codes.DeadlineExceeded
}

// health is what relisting tells the rest of the program about itself.
// Relisting writes it; Healthy, Status and the relist loop read it, from
// any goroutine. It never calls the runtime.
type health struct {
	mu sync.Mutex
	// lastRelist is the start of the last successful global relist.
	lastRelist time.Time
	// inFlightSince is the start of the global relist running; zero when
	// none runs.
	inFlightSince time.Time
	// listFailingSince is when global lists started failing, listErr the
	// latest failure; zero and nil while lists succeed.
	listFailingSince time.Time
	listErr          error
	// failing holds the pods whose latest inspection failed.
	failing map[string]*PodFailure
}

func newHealth() *health {
	return &health{failing: make(map[string]*PodFailure)}
}

func (h *health) last() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastRelist
}

// relistStarted records the start of a global relist.
func (h *health) relistStarted(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlightSince = at
}

// relistDone records that the global relist in flight returned.
func (h *health) relistDone() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlightSince = time.Time{}
}

// relisted records a successful global relist that started at start.
func (h *health) relisted(start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastRelist = start
}

// listed records whether a list made at start, global or of one pod,
// succeeded. On a failure it reports whether lists had succeeded until
// then, so that a runtime that is down is logged as an error once; on a
// success, since when they had been failing, or zero.
func (h *health) listed(start time.Time, err error) (firstFailure bool, failedSince time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		firstFailure = h.listFailingSince.IsZero()
		if firstFailure {
			h.listFailingSince = start
		}
		h.listErr = err
		return firstFailure, time.Time{}
	}
	failedSince = h.listFailingSince
	h.listFailingSince, h.listErr = time.Time{}, nil
	return false, failedSince
}

// ListFailingSince reports since when lists have been failing, or zero.
func (h *health) ListFailingSince() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.listFailingSince
}

// podFailed records a failed inspection of a pod and reports whether the
// pod was inspected fine before it.
func (h *health) podFailed(ref podRef, at time.Time, deadline bool, err error) (first bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.failing[ref.uid]
	if f == nil {
		f = &PodFailure{UID: ref.uid, Since: at}
		h.failing[ref.uid] = f
		first = true
	}
	f.Name, f.Namespace, f.Deadline, f.Err = ref.name, ref.namespace, deadline, err
	return first
}

// InspectionFailing reports whether the latest inspection of pod uid failed.
func (h *health) InspectionFailing(uid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.failing[uid]
	return ok
}

// podInspected records a successful inspection of pod uid, or that the pod
// is gone, and reports whether its inspections had been failing.
func (h *health) podInspected(uid string) (wasFailing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.failing[uid]; !ok {
		return false
	}
	delete(h.failing, uid)
	return true
}

// fill copies what it knows into s.
func (h *health) fill(s *Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.LastRelist, s.RelistInFlightSince = h.lastRelist, h.inFlightSince
	s.ListFailingSince, s.ListError = h.listFailingSince, h.listErr
	s.FailingPods = make([]PodFailure, 0, len(h.failing))
	for _, f := range h.failing {
		s.FailingPods = append(s.FailingPods, *f)
	}
	slices.SortFunc(s.FailingPods, func(a, b PodFailure) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.UID, b.UID))
	})
}
