// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// usage is what the runtime accounts to pleg's container at one moment.
type usage struct {
	at       time.Time
	cpu      uint64 // CPU time, ns
	rss, wss uint64 // resident and working-set bytes
}

// plegUsage reads pleg's container's usage from the runtime's CRI stats,
// as the kubelet's summary API does.
func (c *cluster) plegUsage(ctx context.Context) (usage, error) {
	p, err := c.plegPod(ctx)
	if err != nil {
		return usage{}, err
	}
	resp, err := c.runtime.Runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{
		Filter: &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}},
	})
	if err != nil {
		return usage{}, err
	}
	for _, s := range resp.Stats {
		if s.GetAttributes().GetMetadata().GetName() != "pleg" || s.GetCpu() == nil || s.GetMemory() == nil {
			continue
		}
		return usage{
			at:  time.Now(),
			cpu: s.GetCpu().GetUsageCoreNanoSeconds().GetValue(),
			rss: s.GetMemory().GetRssBytes().GetValue(),
			wss: s.GetMemory().GetWorkingSetBytes().GetValue(),
		}, nil
	}
	return usage{}, fmt.Errorf("no stats of pod %s's pleg container among %d", p.Name, len(resp.Stats))
}

// over is the CPU share (1 = a core) from u to v, and v's memory.
func (u usage) over(v usage) string {
	share := float64(v.cpu-u.cpu) / float64(v.at.Sub(u.at).Nanoseconds())
	return fmt.Sprintf("CPU %.2f%% of a core over %v, RSS %.1f MiB, working set %.1f MiB",
		100*share, v.at.Sub(u.at).Round(time.Second), float64(v.rss)/(1<<20), float64(v.wss)/(1<<20))
}
