// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package runtime defines what a pod lifecycle event generator needs from a
// CRI container runtime, and the pod-level view built on top of it.
//
// The Runtime interface is the narrow subset of the CRI v1 RuntimeService
// that relisting uses. Its method signatures are those of
// k8s.io/cri-api/pkg/apis.RuntimeService, so a k8s.io/cri-client remote
// runtime, a hand-written gRPC adapter and the in-memory fake in
// runtime/fakeruntime all satisfy it.
package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the kubelet sets on every CRI container and sandbox it creates.
const (
	PodUIDLabel        = "io.kubernetes.pod.uid"
	PodNameLabel       = "io.kubernetes.pod.name"
	PodNamespaceLabel  = "io.kubernetes.pod.namespace"
	ContainerNameLabel = "io.kubernetes.container.name"
)

// Annotations the kubelet sets on CRI containers.
const (
	ContainerRestartCountAnnotation = "io.kubernetes.container.restartCount"
	ContainerHashAnnotation         = "io.kubernetes.container.hash"
)

// Runtime is what the generator calls on the container runtime: one list of
// sandboxes and one of containers per relist, optionally narrowed to a pod
// with a label selector on PodUIDLabel, and the status of single sandboxes
// and containers when a pod is inspected.
//
// Implementations must be safe for concurrent use: pods are inspected in
// parallel. A status call for an ID the runtime no longer knows must return a
// gRPC NotFound error (see k8s.io/cri-api/pkg/errors.IsNotFound); callers
// treat that as a removal that raced with the list, not as a failure.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

// PodSandboxFilterForPod narrows ListPodSandbox to one pod.
func PodSandboxFilterForPod(uid string) *runtimeapi.PodSandboxFilter {
	return &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{PodUIDLabel: uid}}
}

// ContainerFilterForPod narrows ListContainers to one pod.
func ContainerFilterForPod(uid string) *runtimeapi.ContainerFilter {
	return &runtimeapi.ContainerFilter{LabelSelector: map[string]string{PodUIDLabel: uid}}
}

// Pod is one pod as a relist saw it: the sandboxes and containers the
// runtime listed for one pod UID. The slices hold the runtime's own list
// items; they are shared and must not be modified.
type Pod struct {
	UID       string
	Name      string
	Namespace string

	Sandboxes  []*runtimeapi.PodSandbox
	Containers []*runtimeapi.Container
}

// PodStatus is the result of inspecting a pod: the status of each of its
// sandboxes and containers, newest first, and the pod's IPs. A PodStatus
// handed out by the generator or the pod cache is shared: treat it as
// read-only.
type PodStatus struct {
	UID       string
	Name      string
	Namespace string

	// IPs are the pod's IPs, primary first, taken from its newest sandbox
	// when that sandbox is ready. The generator keeps the last known IPs of
	// a pod whose sandboxes have all been torn down.
	IPs []string

	Sandboxes  []*runtimeapi.PodSandboxStatus
	Containers []*runtimeapi.ContainerStatus
}

// FindContainer returns the newest status of the container with the given
// name, or nil.
func (s *PodStatus) FindContainer(name string) *runtimeapi.ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.GetMetadata().GetName() == name {
			return c
		}
	}
	return nil
}

// FindContainerByID returns the status of the container with the given ID,
// or nil.
func (s *PodStatus) FindContainerByID(id string) *runtimeapi.ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.GetId() == id {
			return c
		}
	}
	return nil
}
