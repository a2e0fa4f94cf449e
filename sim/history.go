// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import "fmt"

// ChangeOp names a kind of runtime change.
type ChangeOp string

// The runtime changes History records.
const (
	ChangeRunPod          ChangeOp = "run-pod"          // a sandbox was created, ready
	ChangeStopPod         ChangeOp = "stop-pod"         // a sandbox became not ready
	ChangeRemovePod       ChangeOp = "remove-pod"       // a sandbox was removed
	ChangeCreateContainer ChangeOp = "create-container" // a container was created
	ChangeStartContainer  ChangeOp = "start-container"  // a container started running
	ChangeExitContainer   ChangeOp = "exit-container"   // a running container exited
	ChangeRemoveContainer ChangeOp = "remove-container" // a container was removed
)

// Cause says what made a change.
type Cause string

// The causes of changes.
const (
	// CauseInitial: the pods running when the simulator was built. They
	// send no events: they were running before anyone could subscribe.
	CauseInitial Cause = "initial"
	// CauseClient: a CRI call.
	CauseClient Cause = "client"
	// CauseCrash: a container crashed.
	CauseCrash Cause = "crash"
	// CauseRestart: the new attempt of a crashed container.
	CauseRestart Cause = "restart"
	// CauseExit: a container exited cleanly.
	CauseExit Cause = "exit"
	// CauseReplace: a pod was deleted, or created in place of one.
	CauseReplace Cause = "replace"
	// CauseShortLived: a short-lived container came or went.
	CauseShortLived Cause = "short"
	// CauseGC: an exited container was garbage collected.
	CauseGC Cause = "gc"
)

// Change is one runtime change. It holds no wall-clock time, so two
// simulators with one seed and one sequence of Step calls record equal
// changes.
type Change struct {
	// Seq is the change's position in the runtime's history, from 1.
	Seq uint64
	// Tick is the churn tick that made the change, from 1; for a change
	// made by a client, the number of ticks applied before it.
	Tick  uint64
	Op    ChangeOp
	Cause Cause

	PodUID       string
	PodName      string
	PodNamespace string
	SandboxID    string
	// ContainerID and ContainerName are empty for sandbox changes.
	ContainerID   string
	ContainerName string
	// Attempt is the container's or sandbox's attempt.
	Attempt uint32
	// ExitCode and Reason are set for exits.
	ExitCode int32
	Reason   string
}

// history keeps the last limit changes in a ring.
type history struct {
	limit int
	buf   []Change
	start int
	total uint64
}

func (h *history) add(c Change) {
	h.total++
	c.Seq = h.total
	if h.limit < 0 {
		return
	}
	if len(h.buf) < h.limit {
		h.buf = append(h.buf, c)
		return
	}
	h.buf[h.start] = c
	h.start = (h.start + 1) % h.limit
}

func (h *history) list() []Change {
	out := make([]Change, 0, len(h.buf))
	out = append(out, h.buf[h.start:]...)
	return append(out, h.buf[:h.start]...)
}

// String describes a change for logs and test failures.
func (c Change) String() string {
	s := fmt.Sprintf(
		"#%d tick %d %s (%s) pod %s/%s sandbox %.12s",
		c.Seq,
		c.Tick,
		c.Op,
		c.Cause,
		c.PodNamespace,
		c.PodName,
		c.SandboxID,
	)
	if c.ContainerID != "" {
		s += fmt.Sprintf(" container %s/%d %.12s", c.ContainerName, c.Attempt, c.ContainerID)
	}
	if c.Op == ChangeExitContainer {
		s += fmt.Sprintf(" exit %d %s", c.ExitCode, c.Reason)
	}
	return s
}
