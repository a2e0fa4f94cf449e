// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The words of a container's life, in one place, as the kubelet keeps
// convertState beside generateEvents: the states a list or a payload
// shows, the steps the event stream reports, how far on each is, and the
// kubelet's table of the events a change of state yields.

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

// rankFrom places a state a transition starts from in a container's life:
// there, non-existent is before the container was created.
func (s state) rankFrom() int {
	if s == stateNonExistent {
		return rankNone
	}
	return s.rankTo()
}

// rankTo places a state a transition goes to in a container's life:
// there, non-existent is after the container was removed.
func (s state) rankTo() int {
	switch s {
	case stateUnknown:
		return rankCreated
	case stateRunning:
		return rankRunning
	case stateExited:
		return rankExited
	default:
		return rankRemoved
	}
}

// transition is a container or sandbox changing state between two lists.
type transition struct {
	id      string
	name    string
	sandbox bool
	old     state
	new     state
	// afterRestart marks a change found by comparing the runtime with the
	// records a Store restored; started and finished are then the
	// container's own times (CRI nanoseconds), where the runtime has them.
	afterRestart      bool
	started, finished int64
	// detail is the container's status as inspected for this change, or
	// as last inspected for a removal; nil for sandboxes and where none
	// was seen.
	detail *detail
}

// transitionEvents is the kubelet's transition table: the events a
// container or sandbox going from one state to another yields, in order.
// Equal states yield none; a container that vanishes without having been
// seen exited yields ContainerDied then ContainerRemoved.
func transitionEvents(from, to state) (events [2]EventType, n int) {
	switch {
	case from == to:
		return events, 0
	case to == stateRunning:
		return [2]EventType{ContainerStarted}, 1
	case to == stateExited:
		return [2]EventType{ContainerDied}, 1
	case to == stateUnknown:
		return [2]EventType{ContainerChanged}, 1
	case from == stateExited:
		return [2]EventType{ContainerRemoved}, 1
	default:
		return [2]EventType{ContainerDied, ContainerRemoved}, 2
	}
}

// deliverable counts the events a transition delivers: the table's,
// without ContainerChanged, which is never delivered.
func deliverable(from, to state) int {
	types, n := transitionEvents(from, to)
	count := 0
	for _, t := range types[:n] {
		if t != ContainerChanged {
			count++
		}
	}
	return count
}

// stage is a step of a container's life an event reported.
type stage uint8

const (
	stageCreated stage = 1 << iota
	stageStarted
	stageStopped
	stageDeleted
)

// eventKind is what the type of a CRI container event tells, in the
// generator's words.
type eventKind struct {
	// stage is the step the event reports; 0 for a type CRI does not
	// define.
	stage stage
	// label is the type label of pleg_evented_hints_total.
	label string
	// event is the event it tells of, as Options.Trace names it; none for
	// CREATED, which tells nothing a subscriber sees.
	event EventType
	// need is how far on the status of the event's subject must be for
	// its payload to be taken: a STOPPED whose status still runs was
	// taken before the exit.
	need int
}

// kindOf is the one reading of a CRI container event's type.
func kindOf(t runtimeapi.ContainerEventType) eventKind {
	switch t {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return eventKind{stage: stageCreated, label: "created"}
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return eventKind{stage: stageStarted, label: "started", event: ContainerStarted, need: rankRunning}
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return eventKind{stage: stageStopped, label: "stopped", event: ContainerDied, need: rankExited}
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		return eventKind{stage: stageDeleted, label: "deleted", event: ContainerRemoved}
	default:
		return eventKind{label: "unknown"}
	}
}

// expand fills in the states a transition skipped that the stream saw: a
// container that started and exited between two relists goes from not
// existing to exited, and the stream tells that it ran. States are taken
// in the order a container lives them; created stays silent, as always.
func expand(t transition, seen stage) []transition {
	first, last := t.old.rankFrom(), t.new.rankTo()
	if seen == 0 || last <= first {
		return []transition{t}
	}
	states := []state{t.old}
	if seen&stageStarted != 0 && first < rankRunning && rankRunning < last {
		states = append(states, stateRunning)
	}
	if seen&stageStopped != 0 && first < rankExited && rankExited < last {
		states = append(states, stateExited)
	}
	if len(states) == 1 {
		return []transition{t}
	}
	states = append(states, t.new)
	out := make([]transition, 0, len(states)-1)
	for i := 1; i < len(states); i++ {
		x := t
		x.old, x.new = states[i-1], states[i]
		out = append(out, x)
	}
	return out
}
