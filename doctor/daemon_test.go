// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/plegkit/pleg"
	apiclient "github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/sim"
)

// fakeDaemon serves /healthz as given and /metrics from pleg's own
// collectors, set up by prepare.
func fakeDaemon(t *testing.T, healthCode int, health string, prepare func(m *metrics.PLEG)) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.NewPLEG(reg)
	if err != nil {
		t.Fatal(err)
	}
	prepare(m)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(healthCode)
		_, _ = w.Write([]byte(health + "\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestReadDaemon(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	read := func(server string) *Daemon {
		t.Helper()
		c, err := apiclient.New(server, apiclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return readDaemon(t.Context(), c, clk)
	}
	unix := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

	t.Run("healthy", func(t *testing.T) {
		url := fakeDaemon(t, 200, "ok", func(m *metrics.PLEG) {
			for range 90 {
				m.RelistDuration.Observe(0.004)
			}
			for range 10 {
				m.RelistDuration.Observe(0.3)
			}
			m.LastSeen.Set(unix(now.Add(-2 * time.Second)))
			m.Mode.WithLabelValues(string(pleg.ModeGeneric)).Set(0)
			m.Mode.WithLabelValues(string(pleg.ModeEvented)).Set(1)
			m.InspectionFailures.WithLabelValues(metrics.InspectionDeadline).Add(3)
		})
		d := read(url)
		if d.Error != "" || !d.Healthy || d.Health != "ok" || d.Mode != string(pleg.ModeEvented) || d.Relists != 100 {
			t.Fatalf("daemon %+v", d)
		}
		// 90 relists in the 5 ms bucket, 10 in the 500 ms one.
		if d.RelistP50Seconds <= 0.0025 || d.RelistP50Seconds > 0.005 || d.RelistP99Seconds <= 0.25 || d.RelistP99Seconds > 0.5 {
			t.Errorf("p50 %v, p99 %v", d.RelistP50Seconds, d.RelistP99Seconds)
		}
		if math.Abs(d.LastSeenSecondsAgo-2) > 1e-6 || d.InspectionFailures[metrics.InspectionDeadline] != 3 || d.RelistRunningSeconds != 0 {
			t.Errorf("daemon %+v", d)
		}
	})

	t.Run("unhealthy with a relist hanging", func(t *testing.T) {
		msg := "PLEG is not healthy: pleg was last seen active 3m10s ago; threshold is 3m0s"
		url := fakeDaemon(t, 500, msg, func(m *metrics.PLEG) {
			m.RelistInFlight.Set(1)
			m.RelistStarted.Set(unix(now.Add(-190 * time.Second)))
			m.LastSeen.Set(unix(now.Add(-190 * time.Second)))
		})
		d := read(url + "/")
		if d.Error != "" || d.Healthy || d.Health != msg || math.Abs(d.RelistRunningSeconds-190) > 1e-6 {
			t.Fatalf("daemon %+v", d)
		}
	})

	t.Run("not a daemon", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		if d := read(srv.URL); !strings.Contains(d.Error, "not a pleg daemon") {
			t.Errorf("daemon %+v", d)
		}
	})

	t.Run("no daemon", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		if d := read(srv.URL); !strings.Contains(d.Error, "reading /healthz") {
			t.Errorf("daemon %+v", d)
		}
	})

	t.Run("garbage metrics", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{not metrics}\n")) })
		srv := httptest.NewServer(mux)
		defer srv.Close()
		if d := read(srv.URL); !strings.Contains(d.Error, "parsing /metrics") {
			t.Errorf("daemon %+v", d)
		}
	})

	t.Run("refused", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		}))
		defer srv.Close()
		if d := read(srv.URL); !strings.Contains(d.Error, "the daemon refused us: server answered 401 Unauthorized") {
			t.Errorf("daemon %+v", d)
		}
	})
}

// A daemon's address that is no http://, https:// or unix:// one is
// reported, and the diagnosis goes on.
func TestDiagnoseReportsABadServerAddress(t *testing.T) {
	_, client := startSim(t, sim.Options{Pods: 1, Containers: 1})
	for _, bad := range []string{"127.0.0.1:9847", "ftp://host/", "http://", ":%"} {
		r := diagnose(t, client, Options{Server: bad})
		if r.Daemon == nil || r.Daemon.URL != bad || !strings.Contains(r.Daemon.Error, "want http://host:port, https://host:port or unix:///path") {
			t.Errorf("%q: %+v", bad, r.Daemon)
		}
	}
}
