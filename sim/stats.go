// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"hash/fnv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Made-up resource use of a simulated container: a steady share of a core
// and a working set, both drawn once from its ID, so that two calls agree
// and the CPU counter only grows.
const (
	statsMaxMilliCores = 250
	statsBaseMemory    = 4 << 20
	statsMaxMemory     = 64 << 20
	statsLayerBytes    = 32 << 10
)

// containerStats makes up the stats of a container listed at now.
func containerStats(c *runtimeapi.Container, startedAt, now int64) *runtimeapi.ContainerStats {
	h := fnv.New64a()
	h.Write([]byte(c.GetId()))
	seed := h.Sum64()
	milliCores := 1 + seed%statsMaxMilliCores
	var cpuNanos uint64
	if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING && startedAt > 0 && now > startedAt {
		cpuNanos = uint64(now-startedAt) * milliCores / 1000
	}
	var nanoCores, memory uint64
	if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
		nanoCores = milliCores * uint64(time.Millisecond)
		memory = statsBaseMemory + (seed>>16)%statsMaxMemory
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.GetId(),
			Metadata:    c.GetMetadata(),
			Labels:      c.GetLabels(),
			Annotations: c.GetAnnotations(),
		},
		Cpu: &runtimeapi.CpuUsage{
			Timestamp:            now,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpuNanos},
			UsageNanoCores:       &runtimeapi.UInt64Value{Value: nanoCores},
		},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       now,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: memory},
			UsageBytes:      &runtimeapi.UInt64Value{Value: memory},
			RssBytes:        &runtimeapi.UInt64Value{Value: memory / 2},
			AvailableBytes:  &runtimeapi.UInt64Value{},
			PageFaults:      &runtimeapi.UInt64Value{},
			MajorPageFaults: &runtimeapi.UInt64Value{},
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/pleg-sim/containers"},
			UsedBytes:  &runtimeapi.UInt64Value{Value: statsLayerBytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: 8},
		},
	}
}

// stats answers the container stats calls: the stats of the containers
// filter lists.
func (s *Sim) stats(
	ctx context.Context,
	o op,
	filter *runtimeapi.ContainerFilter,
) ([]*runtimeapi.ContainerStats, error) {
	f, err := s.begin(ctx, o)
	if err != nil {
		return nil, err
	}
	items := s.st.listContainers(filter).items
	now := s.clock.Now().UnixNano()
	out := make([]*runtimeapi.ContainerStats, 0, len(items))
	s.st.mu.RLock()
	for _, item := range items {
		var startedAt int64
		if c := s.st.containers[item.GetId()]; c != nil {
			startedAt = c.startedAt
		}
		out = append(out, containerStats(item, startedAt, now))
	}
	s.st.mu.RUnlock()
	if err := s.finish(ctx, f, o, len(out)); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *runtimeServer) ContainerStats(
	ctx context.Context,
	req *runtimeapi.ContainerStatsRequest,
) (*runtimeapi.ContainerStatsResponse, error) {
	id := req.GetContainerId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "container ID is required")
	}
	stats, err := r.s.stats(ctx, opContainerStats, &runtimeapi.ContainerFilter{Id: id})
	if err != nil {
		return nil, err
	}
	if len(stats) == 0 {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: not found", id)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: stats[0]}, nil
}

func (r *runtimeServer) ListContainerStats(
	ctx context.Context,
	req *runtimeapi.ListContainerStatsRequest,
) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	stats, err := r.s.stats(ctx, opListContainerStats, &runtimeapi.ContainerFilter{
		Id:            f.GetId(),
		PodSandboxId:  f.GetPodSandboxId(),
		LabelSelector: f.GetLabelSelector(),
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: stats}, nil
}
