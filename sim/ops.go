// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"

	"github.com/plegkit/pleg/runtime"
)

// op indexes the operations, named by runtime's Op constants, so that the per-call path reads faults,
// latencies and counters from arrays instead of maps.
type op uint8

const (
	opVersion op = iota
	opStatus
	opRuntimeConfig
	opUpdateRuntimeConfig
	opRunPodSandbox
	opStopPodSandbox
	opRemovePodSandbox
	opPodSandboxStatus
	opListPodSandbox
	opCreateContainer
	opStartContainer
	opStopContainer
	opRemoveContainer
	opListContainers
	opContainerStatus
	opGetContainerEvents
	opListImages
	opImageStatus
	opPullImage
	opRemoveImage
	opImageFsInfo
	opContainerStats
	opListContainerStats
	opReopenContainerLog
	numOps
)

func (o op) String() string {
	switch o {
	case opVersion:
		return runtime.OpVersion
	case opStatus:
		return runtime.OpStatus
	case opRuntimeConfig:
		return runtime.OpRuntimeConfig
	case opUpdateRuntimeConfig:
		return runtime.OpUpdateRuntimeConfig
	case opRunPodSandbox:
		return runtime.OpRunPodSandbox
	case opStopPodSandbox:
		return runtime.OpStopPodSandbox
	case opRemovePodSandbox:
		return runtime.OpRemovePodSandbox
	case opPodSandboxStatus:
		return runtime.OpPodSandboxStatus
	case opListPodSandbox:
		return runtime.OpListPodSandbox
	case opCreateContainer:
		return runtime.OpCreateContainer
	case opStartContainer:
		return runtime.OpStartContainer
	case opStopContainer:
		return runtime.OpStopContainer
	case opRemoveContainer:
		return runtime.OpRemoveContainer
	case opListContainers:
		return runtime.OpListContainers
	case opContainerStatus:
		return runtime.OpContainerStatus
	case opGetContainerEvents:
		return runtime.OpGetContainerEvents
	case opListImages:
		return runtime.OpListImages
	case opImageStatus:
		return runtime.OpImageStatus
	case opPullImage:
		return runtime.OpPullImage
	case opRemoveImage:
		return runtime.OpRemoveImage
	case opImageFsInfo:
		return runtime.OpImageFsInfo
	case opContainerStats:
		return opNameContainerStats
	case opListContainerStats:
		return opNameListContainerStats
	case opReopenContainerLog:
		return opNameReopenContainerLog
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Names of the operations the simulator serves that pleg's runtime
// client never calls, so that package runtime does not name them.
const (
	opNameContainerStats     = "container_stats"
	opNameListContainerStats = "list_container_stats"
	opNameReopenContainerLog = "reopen_container_log"
)

// Operations returns every operation name the simulator serves, in a
// fixed order.
func Operations() []string {
	names := make([]string, numOps)
	for o := range numOps {
		names[o] = o.String()
	}
	return names
}

// lookupOp returns the index of an operation name.
func lookupOp(name string) (op, bool) {
	for o := range numOps {
		if o.String() == name {
			return o, true
		}
	}
	return 0, false
}
