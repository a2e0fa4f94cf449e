// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package trace names the stages an event goes through inside a generator,
// from the runtime's stream to the subscribers, for benchmarks that break
// an event's latency down. It is internal: a library user has no stable
// stage names to depend on, and the generator calls a Func only when one
// is set, so tracing costs a nil check when off.
package trace

import "time"

// Stage is a point an event passes inside the generator.
type Stage uint8

// The stages, in the order an event told by its payload passes them. An
// event taken as a hint passes Received and Dequeued, then Committed and
// Published after the relist of its pod.
const (
	// Received: the stream's reader has the decoded message and queues it.
	Received Stage = iota
	// Dequeued: the relist loop takes it off the queue.
	Dequeued
	// Hinted: the loop took it as a hint: a relist of its pod will tell it.
	Hinted
	// Applied: its payload is applied and the pod's status cached.
	Applied
	// Committed: the store returned from committing it.
	Committed
	// Published: it is handed to the Watch channel and the subscriptions.
	Published
	// NumStages counts the stages.
	NumStages
)

var names = [NumStages]string{"received", "dequeued", "hinted", "applied", "committed", "published"}

// String names the stage.
func (s Stage) String() string {
	if s < NumStages {
		return names[s]
	}
	return "unknown"
}

// Func is told when the event of type typ (a pleg.EventType's string)
// about containerID passes stage. It runs on the generator's goroutines
// and must return at once.
type Func func(stage Stage, containerID, typ string, at time.Time)
