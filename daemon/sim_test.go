// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"log/slog"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// TestHealthzFollowsAHungRuntime runs the daemon over the simulator, makes
// the runtime's container list hang, and watches /healthz turn 500 with
// the kubelet's message once the threshold passes, then 200 again once
// the runtime answers.
func TestHealthzFollowsAHungRuntime(t *testing.T) {
	latency, _ := sim.LatencyPreset("zero")
	s := simtest.Start(t, sim.Options{Pods: 3, Containers: 2, Latency: latency, Seed: 1})
	// Each runtime call gives up after a second, as --timeout 1s would.
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })

	d, _ := runDaemon(t, Config{
		Runtime:   rt,
		Generator: pleg.Options{RelistPeriod: 100 * time.Millisecond, RelistThreshold: 2 * time.Second},
		Listen:    "127.0.0.1:0",
	})
	healthz := "http://" + d.Addr() + "/healthz"
	status := func() (int, string) { return get(t, http.DefaultClient, healthz) }

	eventually(t, "healthy", func() bool { code, _ := status(); return code == 200 })

	faults, err := sim.ParseFaults("hang=list_containers")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	unhealthy := regexp.MustCompile(`^PLEG is not healthy: pleg was last seen active (\d+\.?\d*)(ms|s) ago; threshold is 2s\n$`)
	eventually(t, "unhealthy", func() bool {
		code, body := status()
		if code == 200 {
			return false
		}
		if code != 500 || !unhealthy.MatchString(body) {
			t.Fatalf("/healthz = %d %q, want 500 with the kubelet's message", code, body)
		}
		return true
	})

	if err := s.SetFaults(sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy again", func() bool {
		code, body := status()
		return code == 200 && body == "ok\n"
	})
}

// TestBuildInfoTellsTheRuntime reads pleg_build_info over the simulator:
// pleg's version and revision, then the runtime's name and version once
// it answered its Version call.
func TestBuildInfoTellsTheRuntime(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 1, Containers: 1, Seed: 2})
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	d, _ := runDaemon(t, Config{Runtime: rt, Listen: "127.0.0.1:0"})
	var got map[string]string
	eventually(t, "pleg_build_info with the runtime's version", func() bool {
		families, err := d.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "pleg_build_info" && len(f.GetMetric()) == 1 {
				got = map[string]string{}
				for _, l := range f.GetMetric()[0].GetLabel() {
					got[l.GetName()] = l.GetValue()
				}
			}
		}
		return got["runtime"] != ""
	})
	if got["runtime"] != sim.RuntimeName || got["runtime_version"] != sim.RuntimeVersion {
		t.Errorf("runtime %q %q, want the simulator's %q %q", got["runtime"], got["runtime_version"], sim.RuntimeName, sim.RuntimeVersion)
	}
	if got["version"] == "" || got["revision"] == "" || got["goversion"] == "" {
		t.Errorf("labels %v: want pleg's version, revision and Go version", got)
	}
}
