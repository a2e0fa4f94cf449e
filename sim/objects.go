// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtime's objects: sandboxes and containers, each with the list
// item and the status it hands out, and their lookup by ID.

type sandbox struct {
	id          string
	md          *runtimeapi.PodSandboxMetadata
	labels      map[string]string
	annotations map[string]string
	handler     string
	createdAt   int64
	ip          string
	nsOptions   *runtimeapi.NamespaceOption
	state       runtimeapi.PodSandboxState

	item   *runtimeapi.PodSandbox
	enc    []byte // item's encoding in a list answer
	status *runtimeapi.PodSandboxStatus

	// containers are the sandbox's containers in creation order.
	containers []*container
	labelUID   string // the pod UID label, for label-selector lookups
	nameKey    string // its reserved name

	// For the workload.
	createdTick uint64
	startedTick uint64 // when a container of the sandbox last started
	removing    bool   // replacement scheduled
	removed     bool
}

// refresh replaces the item and status after a change.
func (sb *sandbox) refresh() {
	sb.item = &runtimeapi.PodSandbox{
		Id:             sb.id,
		Metadata:       sb.md,
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Labels:         sb.labels,
		Annotations:    sb.annotations,
		RuntimeHandler: sb.handler,
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:             sb.id,
		Metadata:       sb.md,
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Labels:         sb.labels,
		Annotations:    sb.annotations,
		RuntimeHandler: sb.handler,
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: sb.nsOptions}},
	}
	// Like containerd, a sandbox that is not ready has no network.
	if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY && sb.ip != "" {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: sb.ip}
	}
	sb.status = st
	sb.enc = encodeItem(sb.item)
}

// listed is the sandbox's list item and its encoding.
func (sb *sandbox) listed() (*runtimeapi.PodSandbox, []byte) { return sb.item, sb.enc }

func (sb *sandbox) change(op ChangeOp, cause Cause) Change {
	return Change{
		Op: op, Cause: cause,
		PodUID: sb.md.GetUid(), PodName: sb.md.GetName(), PodNamespace: sb.md.GetNamespace(),
		SandboxID: sb.id, Attempt: sb.md.GetAttempt(),
	}
}

type container struct {
	id          string
	sb          *sandbox
	md          *runtimeapi.ContainerMetadata
	image       *runtimeapi.ImageSpec
	imageRef    string
	mounts      []*runtimeapi.Mount
	labels      map[string]string
	annotations map[string]string
	logPath     string
	createdAt   int64
	startedAt   int64
	finishedAt  int64
	state       runtimeapi.ContainerState
	exitCode    int32
	reason      string

	item   *runtimeapi.Container
	enc    []byte // item's encoding in a list answer
	status *runtimeapi.ContainerStatus

	labelUID string
	nameKey  string

	// For the workload.
	startedTick uint64
	short       bool
	removed     bool
}

func (c *container) refresh() {
	c.item = &runtimeapi.Container{
		Id:           c.id,
		PodSandboxId: c.sb.id,
		Metadata:     c.md,
		Image:        c.image,
		ImageRef:     c.imageRef,
		State:        c.state,
		CreatedAt:    c.createdAt,
		Labels:       c.labels,
		Annotations:  c.annotations,
		ImageId:      c.imageRef,
	}
	c.status = &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.md,
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       c.image,
		ImageRef:    c.imageRef,
		ImageId:     c.imageRef,
		Reason:      c.reason,
		Labels:      c.labels,
		Annotations: c.annotations,
		LogPath:     c.logPath,
		Mounts:      c.mounts,
	}
	c.enc = encodeItem(c.item)
}

// listed is the container's list item and its encoding.
func (c *container) listed() (*runtimeapi.Container, []byte) { return c.item, c.enc }

func (c *container) change(op ChangeOp, cause Cause) Change {
	ch := c.sb.change(op, cause)
	ch.ContainerID = c.id
	ch.ContainerName = c.md.GetName()
	ch.Attempt = c.md.GetAttempt()
	return ch
}

// resolve finds an item by ID or, like containerd, by a unique prefix of
// one.
func resolve[T any](m map[string]*T, id, kind string) (*T, error) {
	if v, ok := m[id]; ok {
		return v, nil
	}
	if id == "" || len(id) >= 64 {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
	}
	var found *T
	for k, v := range m {
		if strings.HasPrefix(k, id) {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "%s ID prefix %q is ambiguous", kind, id)
			}
			found = v
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
	}
	return found, nil
}

func (st *store) sandbox(id string) (*sandbox, error) {
	return resolve(st.sandboxes, id, "sandbox")
}

func (st *store) container(id string) (*container, error) {
	return resolve(st.containers, id, "container")
}
