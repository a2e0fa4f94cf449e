package runtime

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/metrics"
)

// Operation types, spelled as the kubelet's operation_type label.
const (
	OpListPodSandbox   = "list_podsandbox"
	OpListContainers   = "list_containers"
	OpPodSandboxStatus = "podsandbox_status"
	OpContainerStatus  = "container_status"
)

// Instrument returns rt with every call counted, timed and, when it fails,
// counted as an error in m, as the kubelet's instrumented runtime service
// does. A call is recorded when it returns: one that hangs shows only in
// the generator's relist-in-flight gauge until then.
func Instrument(rt Runtime, m *metrics.RuntimeOperations) Runtime {
	return &instrumented{rt: rt, m: m}
}

type instrumented struct {
	rt Runtime
	m  *metrics.RuntimeOperations
}

func (i *instrumented) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	start := time.Now()
	items, err := i.rt.ListPodSandbox(ctx, filter)
	i.m.Observe(OpListPodSandbox, time.Since(start), err)
	return items, err
}

func (i *instrumented) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	start := time.Now()
	items, err := i.rt.ListContainers(ctx, filter)
	i.m.Observe(OpListContainers, time.Since(start), err)
	return items, err
}

func (i *instrumented) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	start := time.Now()
	resp, err := i.rt.PodSandboxStatus(ctx, id, verbose)
	i.m.Observe(OpPodSandboxStatus, time.Since(start), err)
	return resp, err
}

func (i *instrumented) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	start := time.Now()
	resp, err := i.rt.ContainerStatus(ctx, id, verbose)
	i.m.Observe(OpContainerStatus, time.Since(start), err)
	return resp, err
}
