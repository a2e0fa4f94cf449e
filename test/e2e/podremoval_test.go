// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// TestRunningPodRemoved: RemovePodSandbox removes a pod that still runs
// (crictl rmp -f), and CRI-O then sends no event at all. With the
// safety-net relist an hour away, the daemon must still report the
// container and the sandbox Died and Removed, once each: the events, or
// the removal watch, find them.
func TestRunningPodRemoved(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		if !in.Spec.HasEvents() {
			t.Skipf("%s has no event stream", in.Spec)
		}
		d := startDaemonIn(t, in, daemonDir(t),
			"--mode", "evented", "--evented-relist-period", "1h", "--evented-relist-threshold", "2h")
		pod := newPod("removed-running")
		f := follow(t, d.client, client.EventsRequest{Filter: api.Filter{Pods: []string{pod.UID}}})
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		app, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		wait(t, "app started", func() bool { return f.count(app, "ContainerStarted") > 0 })
		wait(t, "the stream driving", func() bool { return drives(t.Context(), d.client) })

		must(t, in.RemovePod(ctx(t), sb))
		wait(t, "the pod removed", func() bool {
			return f.count(app, "ContainerRemoved") > 0 && f.count(sb, "ContainerRemoved") > 0
		})
		for _, id := range []string{sb, app} {
			for _, typ := range []string{"ContainerDied", "ContainerRemoved"} {
				if n := f.count(id, typ); n != 1 {
					t.Errorf("%s %s: %d times in %s", typ, id, n, describeAPI(f.got()))
				}
			}
		}
	})
}

// drives reports whether a daemon's event stream drives, as its pleg_mode
// says.
func drives(ctx context.Context, c *client.Client) bool {
	families, err := c.Metrics(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(families["pleg_mode"].GetMetric(), func(m *dto.Metric) bool {
		return m.GetGauge().GetValue() == 1 && slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == "mode" && l.GetValue() == "evented"
		})
	})
}
