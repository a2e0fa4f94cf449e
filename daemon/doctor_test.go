// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// The doctor reads a running daemon beside the runtime: with a hung pod the
// kubelet's relist would stall, while pleg's daemon stays healthy, cutting
// that pod at its deadline; with a hung container list the daemon itself
// turns unhealthy and the doctor says so.
func TestDoctorReadsTheDaemon(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	s := simtest.Start(t, sim.Options{Pods: 6, Containers: 2, Seed: 5, Events: sim.EventsOff})
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), RequestTimeout: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	d, _ := runDaemon(t, Config{
		Runtime:   rt,
		Generator: pleg.Options{RelistPeriod: 100 * time.Millisecond, RelistThreshold: 2 * time.Second, InspectTimeout: 300 * time.Millisecond},
		Listen:    "127.0.0.1:0",
	})
	server := "http://" + d.Addr()
	ctx := t.Context()

	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	hung := sbs[0].GetMetadata().GetUid()
	if err := s.SetFaults(sim.Faults{HangPod: hung}); err != nil {
		t.Fatal(err)
	}
	// Let the daemon relist a few times with the pod hung.
	eventually(t, "relists with the hung pod", func() bool {
		ok, _ := d.Gen.Healthy()
		return ok && relists(t, server) >= 5
	})

	r, err := doctor.Diagnose(ctx, rt.Client(), doctor.Options{Endpoint: s.Endpoint(), Budget: 8 * time.Second, Server: server})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != doctor.Unhealthy || r.Findings[0].ID != "hung-pod" || r.Findings[0].Pod.UID != hung {
		t.Fatalf("verdict %s, findings %+v", r.Verdict, r.Findings)
	}
	dm := r.Daemon
	if dm == nil || dm.Error != "" || !dm.Healthy || dm.Relists < 5 || dm.Mode != "generic" || dm.InspectionFailures["deadline"] == 0 {
		t.Fatalf("daemon %+v", dm)
	}
	// Its relists wait out the hung pod's 300 ms deadline, no more.
	if dm.RelistP50Seconds < 0.25 || dm.RelistP99Seconds > 2.5 || dm.LastSeenSecondsAgo > 2 {
		t.Errorf("daemon relists %+v", dm)
	}

	if err := s.SetFaults(sim.Faults{Hang: map[string]bool{runtime.OpListContainers: true}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon unhealthy", func() bool { ok, _ := d.Gen.Healthy(); return !ok })
	r, err = doctor.Diagnose(ctx, rt.Client(), doctor.Options{Endpoint: s.Endpoint(), Budget: 4 * time.Second, Server: server})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != doctor.Unhealthy || r.Daemon.Healthy {
		t.Fatalf("verdict %s, daemon %+v", r.Verdict, r.Daemon)
	}
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.ID)
	}
	for _, want := range []string{"list-failed", "daemon-unhealthy"} {
		found := false
		for _, id := range ids {
			found = found || id == want
		}
		if !found {
			t.Errorf("findings %v lack %s", ids, want)
		}
	}
}

// relists reads the daemon's count of global relists.
func relists(t *testing.T, server string) int {
	_, body := get(t, http.DefaultClient, server+"/metrics")
	m := regexp.MustCompile(`(?m)^kubelet_pleg_relist_duration_seconds_count (\d+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no relist count in /metrics")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
