// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"time"
)

// EventType is the kind of a pod lifecycle event. The values are the
// kubelet's, so events can be logged and matched the way kubelet's are.
type EventType string

const (
	// ContainerStarted means a container or sandbox was newly seen running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied means a container or sandbox was newly seen exited, or
	// vanished without having been seen exited.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved means a container or sandbox is no longer listed.
	ContainerRemoved EventType = "ContainerRemoved"
	// PodSync means the pod was re-inspected on request and no container changed
	// state; its status in the cache may still have changed.
	PodSync EventType = "PodSync"
	// ContainerChanged means a container went to an unknown state. Generated to
	// mirror the kubelet's transition table, never delivered.
	ContainerChanged EventType = "ContainerChanged"
	// ConditionMet means at least one watch condition set on the pod holds.
	ConditionMet EventType = "ConditionMet"
)

// Event is one pod lifecycle event.
type Event struct {
	Type EventType

	PodUID       string
	PodName      string
	PodNamespace string

	// ContainerID is the runtime's ID of the container or sandbox the event
	// is about; empty for PodSync and ConditionMet.
	ContainerID string
	// ContainerName is the container's name when known; empty for sandboxes.
	ContainerName string
	// Sandbox tells that ContainerID is a pod sandbox. The kubelet tracks
	// sandboxes like containers and cannot tell them apart in its events.
	Sandbox bool

	// Observed is when the generator saw the change: the start of the
	// relist that listed it, or the receipt of the runtime's event whose
	// payload told it.
	Observed time.Time

	// AfterRestart tells that the change happened while no generator
	// watched: the first relist of a generator restored from a Store found
	// it by comparing the runtime with what was last reported.
	AfterRestart bool
	// StartedAt and FinishedAt are the container's own start and finish
	// times as the runtime reports them, set on events found after a
	// restart, whose Observed says only when they were found; FinishedAt
	// is also set on every ContainerDied of a container the runtime
	// reported exited. Zero where the runtime reports none.
	StartedAt  time.Time
	FinishedAt time.Time

	// The fields below come from the container status the generator
	// inspected before delivering the event, never from a later call, and
	// are left empty where that status has nothing to say: sandboxes have
	// no image, attempt or exit code, and a container that vanished
	// without having been seen exited has no status at all. Pointers are
	// shared by every subscriber of the event: read, do not modify.

	// Image is the container's image as the runtime reports it in its
	// status, CRI's image.image, else image_ref: CRI-O reports the
	// reference the container was created from, as in the pod spec
	// ("nginx:1.27"), containerd the image's first tag, which is the same
	// unless the image has several. Set on container events (Started,
	// Died and, where the container was seen before, Removed).
	Image string
	// Attempt is the container's restart attempt, the CRI metadata's
	// attempt: 0 for a container's first run, one more for each
	// restart; nil where unknown.
	Attempt *uint32
	// ExitCode, Reason and Message say why a container died: its exit
	// code, the runtime's reason ("Completed", "Error", "OOMKilled", …)
	// and its message, as the runtime reports them in the status of the
	// exited container. Set on ContainerDied only; ExitCode is nil where
	// the runtime reported no exit (a sandbox, a container that
	// vanished), so that 0 means the container exited 0.
	ExitCode *int32
	Reason   string
	Message  string
}
