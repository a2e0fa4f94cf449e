// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package stream keeps a CRI runtime's container event stream open for a
// pod lifecycle event generator and makes up for what the stream leaves
// out: removals it does not tell (removals.go), relists of pods that
// failed (retries.go), and the backlog a runtime keeps for its next
// subscriber (backlog.go). It holds none of the generator's relist state;
// it drives the generator through the Generator interface, so that the
// generator's relist lock stays the generator's own.
package stream

import (
	"log/slog"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
)

// Generator is what the stream machinery drives. Its methods are called
// from the machinery's own goroutines, and must not block: a slow reader
// stalls the runtime's own event handlers.
type Generator interface {
	// Deliver takes an event with the time its stream connected.
	Deliver(ev *runtimeapi.ContainerEventResponse, connectedAt time.Time)
	// StreamChanged is called when the stream connects, ends after being
	// open, or fails to open: what changed meanwhile only a list can tell.
	StreamChanged(c Change)
	// RelistPod asks for a relist of pod uid now, for the reason given.
	RelistPod(uid string, why Reason)
}

// Change is what became of the stream, as StreamChanged tells it.
type Change uint8

const (
	// Connected tells that the stream is open.
	Connected Change = iota
	// Ended tells that the stream ended after being open.
	Ended
	// Failed tells that the stream could not be opened.
	Failed
)

// Health is what the retries need to know of how the generator's relists
// fare.
type Health interface {
	// InspectionFailing reports whether pod uid's latest inspection failed.
	InspectionFailing(uid string) bool
	// ListFailingSince returns since when the runtime's lists fail, zero
	// while they succeed.
	ListFailingSince() time.Time
}

// Reason is why the stream machinery asks for a relist of a pod.
type Reason uint8

const (
	// RemovalUnseen is asked for when the removal watch found an item of
	// the pod gone that no event told of.
	RemovalUnseen Reason = iota
	// RetryFailed is asked for when the pod's last relist failed and its
	// backoff ran out.
	RetryFailed
)

// Config is how a Supervisor runs.
type Config struct {
	// Required makes a runtime without a stream a fault, retried with
	// backoff like any other; otherwise the stream is asked for again
	// every NoStreamRetry.
	Required      bool
	NoStreamRetry time.Duration
	Clock         clock.WithDelayedExecution
	Logger        *slog.Logger
	Metrics       *metrics.PLEG
}

// New returns the supervisor of src's event stream for g, with the removal
// watch that lists rt for what the stream does not tell and the retries
// of the pods whose relist failed, paced by h.
func New(src runtime.EventSource, rt runtime.Runtime, g Generator, h Health, cfg Config) *Supervisor {
	s := newSupervisor(src, g, cfg)
	s.watch = newRemovalWatch(rt, cfg.Clock, cfg.Logger,
		func(k RemovalKind) bool {
			now := cfg.Clock.Now()
			return s.holding(now) && !s.tellsRemovals(k, now)
		},
		func(uid string) { g.RelistPod(uid, RemovalUnseen) })
	s.retries = newPodRetries(cfg.Clock,
		func(uid string) { g.RelistPod(uid, RetryFailed) },
		h.InspectionFailing, h.ListFailingSince)
	return s
}

// Report is what a relist or an event's payload reported of one pod.
type Report struct {
	UID string
	// Items are the pod's containers and sandboxes whose state changed;
	// the caller's again once Reported returns.
	Items []Item
	// Observed is when the change was observed.
	Observed time.Time
	// Untold are the removals among the items that no event told, and
	// LastObserved is when those items were observed before: a removal
	// counts against the stream only if it was connected since then.
	Untold       Removals
	LastObserved time.Time
}

// Item is what a relist or a payload reported of one of a pod's
// containers or sandboxes: the removal watch learns from it which items
// may be removed unseen.
type Item struct {
	ID      string
	Sandbox bool
	// Now is the item's state as reported.
	Now ItemState
}

// ItemState is the state of an Item, as far as the removal watch cares.
type ItemState uint8

const (
	// ItemOther is any state the watch does not follow.
	ItemOther ItemState = iota
	// ItemRunning is a running container or a ready sandbox.
	ItemRunning
	// ItemExited is an exited container or a sandbox not ready.
	ItemExited
	// ItemRemoved is an item gone.
	ItemRemoved
)
