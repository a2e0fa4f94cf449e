// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
)

// ErrNilStatus is returned when the runtime answers a status call with
// neither a status nor an error.
var ErrNilStatus = errors.New("runtime returned no status")

// InspectPod asks the runtime for the status of every sandbox and container
// the relist listed for pod, reusing those lists instead of listing the pod
// again. An item the runtime no longer knows (NotFound) was removed after the
// list and is left out; any other failure stops the inspection and is
// returned together with what was gathered so far, so the result is never
// nil.
//
// Where a sandbox's status answer carries both a Timestamp and the statuses
// of its containers, as CRI-O's does with pod events on, those statuses are
// used instead of one ContainerStatus call per container: the kubelet's
// rule, "both set". A timestamp alone (containerd 2.0.0 to 2.0.2) does not
// mean the pod has no containers; a container the answer lacks, created
// after it, is asked for on its own.
func InspectPod(ctx context.Context, rt Runtime, pod *Pod) (*PodStatus, error) {
	status := &PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	err := inspect(ctx, rt, pod, status)
	// Newest first on every path: a partial status is cached with its error
	// and FindContainer relies on the order.
	sortContainers(status.Containers)
	return status, err
}

// NewPodStatus returns the status of a pod made of the given sandbox and
// container statuses, ordered as InspectPod orders them, newest first, with
// the IPs of the newest sandbox if it is ready. It is how a status the
// runtime sent on its own (an event's payload) becomes a PodStatus.
func NewPodStatus(
	uid, name, namespace string,
	sandboxes []*runtimeapi.PodSandboxStatus,
	containers []*runtimeapi.ContainerStatus,
) *PodStatus {
	status := &PodStatus{UID: uid, Name: name, Namespace: namespace,
		Sandboxes: slices.Clone(sandboxes), Containers: slices.Clone(containers)}
	slices.SortStableFunc(status.Sandboxes, func(a, b *runtimeapi.PodSandboxStatus) int {
		return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	sortContainers(status.Containers)
	if len(status.Sandboxes) > 0 && status.Sandboxes[0].GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
		status.IPs = sandboxIPs(status.Sandboxes[0])
	}
	return status
}

func sortContainers(cs []*runtimeapi.ContainerStatus) {
	slices.SortStableFunc(cs, func(a, b *runtimeapi.ContainerStatus) int {
		return cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt())
	})
}

// inspect fills status in and returns the error that stopped it, if any.
func inspect(ctx context.Context, rt Runtime, pod *Pod, status *PodStatus) error {
	sandboxes := slices.Clone(pod.Sandboxes)
	slices.SortStableFunc(sandboxes, func(a, b *runtimeapi.PodSandbox) int {
		return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	// The container statuses sandbox answers carried, by container ID.
	var carried map[string]*runtimeapi.ContainerStatus
	for _, sb := range sandboxes {
		if err := ctx.Err(); err != nil {
			return contextError(ctx)
		}
		resp, err := rt.PodSandboxStatus(ctx, sb.GetId(), false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("status of sandbox %s: %w", sb.GetId(), callError(ctx, err))
		}
		if resp.GetStatus() == nil {
			return fmt.Errorf("status of sandbox %s: %w", sb.GetId(), ErrNilStatus)
		}
		if len(status.Sandboxes) == 0 && resp.Status.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			status.IPs = sandboxIPs(resp.Status)
		}
		status.Sandboxes = append(status.Sandboxes, resp.Status)
		if resp.GetTimestamp() != 0 && len(resp.GetContainersStatuses()) > 0 {
			if carried == nil {
				carried = make(map[string]*runtimeapi.ContainerStatus)
			}
			for _, c := range resp.GetContainersStatuses() {
				if c.GetId() != "" {
					carried[c.GetId()] = c
				}
			}
		}
	}

	for _, c := range pod.Containers {
		if err := ctx.Err(); err != nil {
			return contextError(ctx)
		}
		if cs, ok := carried[c.GetId()]; ok {
			status.Containers = append(status.Containers, cs)
			continue
		}
		resp, err := rt.ContainerStatus(ctx, c.GetId(), false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("status of container %s: %w", c.GetId(), callError(ctx, err))
		}
		if resp.GetStatus() == nil {
			return fmt.Errorf("status of container %s: %w", c.GetId(), ErrNilStatus)
		}
		status.Containers = append(status.Containers, resp.Status)
	}
	return nil
}

// callError is the error of a failed runtime call. A call cut short by the
// end of ctx reports the cancellation in the runtime's words (a gRPC
// Canceled or DeadlineExceeded status); the cause is put in front so that
// callers can tell which deadline fired, and the runtime's error is kept.
func callError(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := contextError(ctx)
	if errors.Is(err, cause) {
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// contextError prefers the cause a caller attached to the cancellation (a
// per-pod deadline says which deadline) over the bare context error.
func contextError(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return ctx.Err()
}

// sandboxIPs returns the primary and additional IPs of a sandbox, skipping
// any the runtime reported in a form that does not parse.
func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	net := s.GetNetwork()
	if net == nil {
		return nil
	}
	var ips []string
	add := func(ip string) {
		if addr, err := netip.ParseAddr(ip); err == nil {
			ips = append(ips, addr.String())
		}
	}
	add(net.GetIp())
	for _, ip := range net.GetAdditionalIps() {
		add(ip.GetIp())
	}
	return ips
}
