// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Observer records runtime calls: metrics.RuntimeOperations records them
// as the kubelet's kubelet_runtime_operations_* metrics.
type Observer interface {
	// Observe records one call of operation op (an Op* constant) that
	// took d and returned err.
	Observe(op string, d time.Duration, err error)
}

// Instrument returns rt with every call reported to obs when it returns, as
// the kubelet's instrumented runtime service does: a call that hangs shows
// only in the generator's relist-in-flight gauge until then. The result is
// an EventSource exactly when rt is one, so that wrapping a runtime does
// not hide, or invent, its event stream.
func Instrument(rt Runtime, obs Observer) Runtime {
	i := &instrumented{rt: rt, obs: obs}
	if src, ok := rt.(EventSource); ok {
		return &instrumentedSource{instrumented: i, src: src}
	}
	return i
}

type instrumented struct {
	rt  Runtime
	obs Observer
}

func (i *instrumented) ListPodSandbox(
	ctx context.Context,
	filter *runtimeapi.PodSandboxFilter,
) ([]*runtimeapi.PodSandbox, error) {
	start := time.Now()
	items, err := i.rt.ListPodSandbox(ctx, filter)
	i.obs.Observe(OpListPodSandbox, time.Since(start), err)
	return items, err
}

func (i *instrumented) ListContainers(
	ctx context.Context,
	filter *runtimeapi.ContainerFilter,
) ([]*runtimeapi.Container, error) {
	start := time.Now()
	items, err := i.rt.ListContainers(ctx, filter)
	i.obs.Observe(OpListContainers, time.Since(start), err)
	return items, err
}

func (i *instrumented) PodSandboxStatus(
	ctx context.Context,
	id string,
	verbose bool,
) (*runtimeapi.PodSandboxStatusResponse, error) {
	start := time.Now()
	resp, err := i.rt.PodSandboxStatus(ctx, id, verbose)
	i.obs.Observe(OpPodSandboxStatus, time.Since(start), err)
	return resp, err
}

func (i *instrumented) ContainerStatus(
	ctx context.Context,
	id string,
	verbose bool,
) (*runtimeapi.ContainerStatusResponse, error) {
	start := time.Now()
	resp, err := i.rt.ContainerStatus(ctx, id, verbose)
	i.obs.Observe(OpContainerStatus, time.Since(start), err)
	return resp, err
}

// instrumentedSource is an instrumented runtime with an event stream.
type instrumentedSource struct {
	*instrumented
	src EventSource
}

// GetContainerEvents implements EventSource, reporting the opening of the
// stream as get_container_events.
func (i *instrumentedSource) GetContainerEvents(ctx context.Context) (EventStream, error) {
	start := time.Now()
	stream, err := i.src.GetContainerEvents(ctx)
	i.obs.Observe(OpGetContainerEvents, time.Since(start), err)
	return stream, err
}
