// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// TestDiagnosisListener runs the daemon over the simulator with the
// diagnosis listener: it serves the daemon's own diagnosis, the bundle
// and the recordings, and nothing else; with the runtime hung, the
// diagnosis comes within its call timeout and names the runtime.
func TestDiagnosisListener(t *testing.T) {
	latency, _ := sim.LatencyPreset("zero")
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1, Latency: latency, Seed: 1})
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), RequestTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	d, _ := runDaemon(t, Config{
		Runtime: rt, Listen: "127.0.0.1:0", StateDir: t.TempDir(),
		FlightRecorder: FlightRecorder{Enabled: true},
		Generator:      pleg.Options{RelistPeriod: 100 * time.Millisecond},
		Diagnosis: Diagnosis{Listen: "127.0.0.1:0", Budget: 4 * time.Second, CallTimeout: time.Second,
			Reuse: time.Nanosecond, Node: "node-1"},
	})
	base := "http://" + d.DiagnosisAddr()
	eventually(t, "healthy", func() bool { code, _ := get(t, http.DefaultClient, "http://"+d.Addr()+"/healthz"); return code == 200 })

	var rep doctor.Report
	code, body := get(t, http.DefaultClient, base+"/v1/doctor")
	if code != 200 || json.Unmarshal([]byte(body), &rep) != nil || !rep.Runtime.Reachable || rep.Daemon == nil ||
		!rep.Daemon.Healthy {
		t.Fatalf("/v1/doctor: %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/v1/recordings": 200, "/v1/pods": 404, "/v1/events": 404, "/metrics": 404, "/healthz": 404,
	} {
		if code, body := get(t, http.DefaultClient, base+path); code != want {
			t.Errorf("diagnosis listener %s: %d %s, want %d", path, code, body, want)
		}
	}

	// Every call of the runtime hangs, as a runtime stopped with SIGSTOP.
	faults, err := sim.ParseFaults("hang=version,hang=status,hang=list_podsandbox,hang=list_containers")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, body = get(t, http.DefaultClient, base+"/v1/doctor")
	took := time.Since(start)
	rep = doctor.Report{}
	if code != 200 || json.Unmarshal([]byte(body), &rep) != nil || rep.Runtime.Reachable || rep.Verdict != doctor.Unhealthy {
		t.Fatalf("/v1/doctor with the runtime hung: %d %s", code, body)
	}
	if took > 10*time.Second {
		t.Errorf("the diagnosis of a hung runtime took %v, past its budget", took)
	}
	t.Logf("/v1/doctor with the runtime hung: %v, verdict %s, first finding %q", took, rep.Verdict, rep.Findings[0].Title)

	resp, err := http.Get(base + "/v1/bundle")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	names := tarNames(t, data)
	for _, want := range []string{"doctor/report.json", "doctor/report.html", "pleg/healthz.txt", "pleg/metrics.txt",
		"manifest.json", "README.txt"} {
		if !strings.Contains(names, "/"+want+"\n") {
			t.Errorf("the bundle lacks %s:\n%s", want, names)
		}
	}
	if !strings.HasPrefix(names, "pleg-bundle-node-1-") {
		t.Errorf("the bundle's files are not under its node's directory:\n%s", names)
	}
}

// tarNames lists the files of a tar.gz, a line each.
func tarNames(t *testing.T, data []byte) string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a gzip: %v: %.100q", err, data)
	}
	tr := tar.NewReader(gz)
	var names strings.Builder
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		names.WriteString(h.Name + "\n")
	}
}
