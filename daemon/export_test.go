// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/otlpexport"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// The daemon exports its journal to a collector: ready whatever the
// collector does, the cursor in the state directory, the metrics in its
// registry; the records name the node and the journal.
func TestExportToACollector(t *testing.T) {
	latency, _ := sim.LatencyPreset("zero")
	s := simtest.Start(t, sim.Options{Pods: 3, Containers: 2, Latency: latency, Seed: 3})
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })

	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	var got []*collogspb.ExportLogsServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(zr)
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, &req)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	d, _ := runDaemon(t, Config{
		Runtime:   rt,
		Generator: pleg.Options{RelistPeriod: 100 * time.Millisecond},
		Listen:    "127.0.0.1:0",
		StateDir:  dir,
		OTLP: OTLP{
			Transport: otlpexport.TransportOptions{Endpoint: srv.URL, Protocol: otlpexport.ProtocolHTTP, Insecure: true},
			NodeName:  "node-1",
		},
	})
	eventually(t, "ready while the collector refuses", func() bool {
		code, _ := get(t, http.DefaultClient, "http://"+d.Addr()+"/readyz")
		return code == 200
	})
	eventually(t, "a refused attempt", func() bool {
		return metric(t, d, "pleg_export_records_failed_total", "retryable") > 0
	})
	down.Store(false)
	eventually(t, "the journal exported", func() bool {
		return metric(t, d, "pleg_export_cursor", "") == float64(d.Journal.Last()) &&
			metric(t, d, "pleg_export_records_total", "") > 0
	})
	fi, err := os.Stat(filepath.Join(dir, otlpexport.CursorFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the cursor file: %v, %v; want it 0600", fi, err)
	}
	mu.Lock()
	defer mu.Unlock()
	res := map[string]string{}
	for _, kv := range got[0].ResourceLogs[0].Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["k8s.node.name"] != "node-1" || res["pleg.journal.id"] != d.Journal.ID() || res["service.name"] != "pleg" {
		t.Errorf("resource %v", res)
	}
}

func metric(t *testing.T, d *Daemon, name, label string) float64 {
	t.Helper()
	mfs, err := d.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
