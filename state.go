// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/stream"
)

// The state of a container or sandbox: what the records hold and compare,
// what transitions go between, and what a container's life steps through.

// state is a container or sandbox state as the generator compares them.
type state uint8

const (
	stateNonExistent state = iota
	stateRunning
	stateExited
	// stateUnknown covers CRI's created and unknown states and any value
	// the runtime sends that CRI does not define.
	stateUnknown
)

// item is the state as the removal watch follows it.
func (s state) item() stream.ItemState {
	switch s {
	case stateRunning:
		return stream.ItemRunning
	case stateExited:
		return stream.ItemExited
	case stateNonExistent:
		return stream.ItemRemoved
	default:
		return stream.ItemOther
	}
}

func (s state) String() string {
	switch s {
	case stateRunning:
		return "running"
	case stateExited:
		return "exited"
	case stateUnknown:
		return "unknown"
	default:
		return "non-existent"
	}
}

// Ranks order the steps of a container's or sandbox's life: it is created
// (unknown), runs, exits and is removed, and never goes back. A later
// observation of one container never ranks lower than an earlier one.
const (
	rankNone = iota // not created yet
	rankCreated
	rankRunning
	rankExited
	rankRemoved
)

// rank places a state in a container's life; non-existent is rankNone
// before the container was seen, and rankRemoved after (after true).
func (s state) rank(after bool) int {
	switch s {
	case stateUnknown:
		return rankCreated
	case stateRunning:
		return rankRunning
	case stateExited:
		return rankExited
	default:
		if after {
			return rankRemoved
		}
		return rankNone
	}
}

// containerState maps a CRI container state; ok is false for a value CRI
// does not define, which counts as unknown.
func containerState(s runtimeapi.ContainerState) (st state, ok bool) {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return stateRunning, true
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return stateExited, true
	case runtimeapi.ContainerState_CONTAINER_CREATED, runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		// The kubelet does not act on created containers yet: unknown.
		return stateUnknown, true
	default:
		return stateUnknown, false
	}
}

// sandboxState maps a CRI sandbox state: a ready sandbox runs, a not-ready
// one has exited.
func sandboxState(s runtimeapi.PodSandboxState) (st state, ok bool) {
	switch s {
	case runtimeapi.PodSandboxState_SANDBOX_READY:
		return stateRunning, true
	case runtimeapi.PodSandboxState_SANDBOX_NOTREADY:
		return stateExited, true
	default:
		return stateUnknown, false
	}
}
