// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"fmt"
	"time"

	"github.com/plegkit/pleg/internal/msgsize"
)

// Availability says whether a runtime offers something.
type Availability string

// Availabilities.
const (
	Supported   Availability = "supported"
	Unsupported Availability = "unsupported"
	// Unknown: not found out, or not yet.
	Unknown Availability = "unknown"
)

// Capability is whether a runtime offers one thing, and what showed it.
type Capability struct {
	Availability Availability `json:"availability"`
	Detail       string       `json:"detail,omitempty"`
}

func (c Capability) String() string {
	if c.Availability == "" {
		return string(Unknown)
	}
	if c.Detail == "" {
		return string(c.Availability)
	}
	return string(c.Availability) + " (" + c.Detail + ")"
}

// Capabilities is what a CRI runtime was found to offer where runtimes and
// their versions differ, and where that changes what a generator can do.
type Capabilities struct {
	// RuntimeName and RuntimeVersion are what the runtime's Version call
	// answers, e.g. "containerd" "v2.4.2", "cri-o" "1.36.3".
	RuntimeName    string `json:"runtimeName,omitempty"`
	RuntimeVersion string `json:"runtimeVersion,omitempty"`
	// ContainerEvents is the container event stream, GetContainerEvents:
	// unsupported when the runtime answers Unimplemented (containerd
	// before 1.7) or ends the stream at once (CRI-O without
	// enable_pod_events).
	ContainerEvents Capability `json:"containerEvents"`
	// PodEvents is whether the events carry the pod as the runtime saw it
	// when it sent them: the status of its sandbox and of each of its
	// containers. Only events show it, so it stays unknown until one
	// arrives.
	PodEvents Capability `json:"podEvents"`
	// StreamingLists are the StreamPodSandboxes and StreamContainers
	// RPCs, which list a node too big for one message.
	StreamingLists Capability `json:"streamingLists"`
	// SandboxStatusContainers is whether PodSandboxStatus answers with
	// both a Timestamp and the statuses of the pod's containers
	// (ContainersStatuses), which spares a ContainerStatus call per
	// container. containerd 2.0.0 to 2.0.2 set the Timestamp alone: that
	// is unsupported, not a pod without containers.
	SandboxStatusContainers Capability `json:"sandboxStatusContainers"`
	// ContainerRemovalEvents is whether the event stream tells the removal
	// of a container by RemoveContainer, with a DELETED event;
	// PodRemovalEvents whether it tells the removal of a pod by
	// RemovePodSandbox, with a DELETED event for its sandbox and for each
	// container removed with it. CRI-O tells the first and not the second.
	// Both are known of the runtimes pleg is tested on, by name and
	// version, until an event shows them.
	ContainerRemovalEvents Capability `json:"containerRemovalEvents"`
	PodRemovalEvents       Capability `json:"podRemovalEvents"`
	// Lists are the sizes of the latest whole-node lists, against the
	// largest message the client accepts.
	Lists ListSizes `json:"lists"`
}

// Lines describes the capabilities one a line, for `pleg version` and
// the daemon's /healthz?verbose.
func (c Capabilities) Lines() []string {
	return []string{
		"event stream: " + c.ContainerEvents.String(),
		"pod events: " + c.PodEvents.String(),
		"streaming lists: " + c.StreamingLists.String(),
		"container statuses in PodSandboxStatus: " + c.SandboxStatusContainers.String(),
		"container removals told: " + c.ContainerRemovalEvents.String(),
		"pod removals told: " + c.PodRemovalEvents.String(),
		"list sizes: " + c.Lists.String(),
	}
}

// ListSizes are the sizes of the latest answers to the whole-node lists
// (no filter) against the receive limit. The margin that matters is the
// largest message's: a unary list is one message, a streamed one many,
// each under the limit.
type ListSizes struct {
	PodSandboxes ListSize `json:"podSandboxes"`
	Containers   ListSize `json:"containers"`
	// LimitBytes is the largest message the client accepts.
	LimitBytes int `json:"limitBytes"`
}

// ListSize is the size of the latest answer to one whole-node list.
type ListSize struct {
	// Items and Bytes are the answer's, over all its messages; Bytes is
	// 0 before the first answer.
	Items int `json:"items"`
	Bytes int `json:"bytes"`
	// LargestMessageBytes is the largest message of the answer: all of
	// it for a unary list.
	LargestMessageBytes int  `json:"largestMessageBytes"`
	Streamed            bool `json:"streamed,omitempty"`
	// At is when the answer arrived.
	At time.Time `json:"at,omitzero"`
}

// Headroom is the share of the limit the largest message of either list
// leaves free: 1 with nothing listed yet, 0 or less at or past the limit.
func (s ListSizes) Headroom() float64 {
	if s.LimitBytes <= 0 {
		return 1
	}
	largest := max(s.PodSandboxes.LargestMessageBytes, s.Containers.LargestMessageBytes)
	return 1 - float64(largest)/float64(s.LimitBytes)
}

func (s ListSizes) String() string {
	if s.PodSandboxes.At.IsZero() && s.Containers.At.IsZero() {
		return fmt.Sprintf("nothing listed yet (limit %s)", msgsize.Bytes(s.LimitBytes))
	}
	return fmt.Sprintf("sandboxes %s, containers %s, of %s a message (%.0f%% headroom)",
		s.PodSandboxes, s.Containers, msgsize.Bytes(s.LimitBytes), 100*s.Headroom())
}

func (s ListSize) String() string {
	how := "one message"
	if s.Streamed {
		how = fmt.Sprintf("streamed, largest message %s", msgsize.Bytes(s.LargestMessageBytes))
	}
	return fmt.Sprintf("%d in %s (%s)", s.Items, msgsize.Bytes(s.Bytes), how)
}

// CapabilityReporter is a runtime that tells what it was found to offer:
// the CRI adapter learns it from its own calls, so its report fills in as
// the runtime is used.
type CapabilityReporter interface {
	Capabilities() Capabilities
}

// ListSizer is a runtime that tells the sizes of its latest whole-node
// lists, to warn before they outgrow the receive limit.
type ListSizer interface {
	ListSizes() ListSizes
}
