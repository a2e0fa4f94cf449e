// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otel

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// churn is the simulator's: tens of events a second over 10 pods.
const churn = "crash=10,exit=2,short=10,pods=0.5"

// batch is pleg's --otlp-batch-size here: small, so that a run makes many
// requests and a kill finds one in flight.
const batch = 20

// outage is how long the collector is down; PLEG_OTEL_OUTAGE shortens it
// while iterating.
func outage(t *testing.T) time.Duration {
	if v := os.Getenv("PLEG_OTEL_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("PLEG_OTEL_OUTAGE=%q: %v", v, err)
		}
		return d
	}
	return 2 * time.Minute
}

func otlpArgs(endpoint string, extra ...string) []string {
	return append([]string{"--otlp-endpoint", endpoint, "--otlp-insecure", "--otlp-batch-size", fmt.Sprint(batch)}, extra...)
}

// received waits until the collector has at least n records.
func waitRecords(t *testing.T, c *collector, n int) {
	t.Helper()
	eventually(t, 2*time.Minute, fmt.Sprintf("%d records at the collector", n), func() bool { return len(c.records()) >= n })
}

func check(t *testing.T, tl tally, wantLost bool) {
	t.Helper()
	t.Logf("counts: %v", tl)
	if len(tl.missing) > 0 {
		t.Errorf("%d numbers never arrived, neither as records nor in a loss record: %v", len(tl.missing), head(tl.missing))
	}
	if len(tl.outOfOrder) > 0 {
		t.Errorf("out of order: %v", tl.outOfOrder[:min(len(tl.outOfOrder), 10)])
	}
	if len(tl.journals) != 1 {
		t.Errorf("records name journals %v, want one", tl.journals)
	}
	if !wantLost && tl.lost > 0 {
		t.Errorf("%d events reported lost", tl.lost)
	}
}

func head(s []uint64) []uint64 { return s[:min(len(s), 10)] }

// While pods churn, the collector is stopped for two minutes and started
// again: every event arrives, in order.
func TestCollectorOutage(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	c.start()
	r := startPleg(t, churn, otlpArgs(c.grpcEndpoint())...)
	waitRecords(t, c, 50)
	c.stop()
	time.Sleep(outage(t)) // the outage itself: pods go on churning
	c.start()
	last := r.quiesce(3 * time.Minute)
	c.waitFor(last)
	tl := account(c.records(), r.first(), last)
	check(t, tl, false)
	if tl.duplicated > batch {
		t.Errorf("%d duplicates: more than the batch in flight when the collector stopped", tl.duplicated)
	}
	if r.metric(`pleg_export_records_failed_total{reason="retryable"}`) <= 0 {
		t.Errorf("no retryable failure counted during the outage")
	}
}

// pleg is SIGKILLed 20 times while exporting: nothing is lost, and the
// only duplicates are the batch in flight at each kill.
func TestKilledWhileExporting(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	c.start()
	r := startPleg(t, churn, otlpArgs(c.httpEndpoint(), "--otlp-protocol", "http/protobuf")...)
	const kills = 20
	for range kills {
		// Kill while exporting: after new records have arrived.
		n := len(c.records())
		waitRecords(t, c, n+batch/2)
		r.p.signal(syscall.SIGKILL)
		r.start()
	}
	last := r.quiesce(2 * time.Minute)
	c.waitFor(last)
	tl := account(c.records(), r.first(), last)
	check(t, tl, false)
	if len(tl.resends) > kills {
		t.Errorf("%d resent stretches, more than the %d kills", len(tl.resends), kills)
	}
	for _, n := range tl.resends {
		if n > batch {
			t.Errorf("a resend of %d records, more than a batch (%d)", n, batch)
		}
	}
	t.Logf("%d kills, %d resends, %d duplicates", kills, len(tl.resends), tl.duplicated)
}

// The collector refuses for a while with retryable errors (a proxy in
// front of its HTTP receiver answering 503): pleg backs off and delivers
// all. A collector that refuses for good (400) gets each batch once: it
// is logged, counted, and pleg moves on.
func TestRefusals(t *testing.T) {
	t.Parallel()
	t.Run("retryable", func(t *testing.T) {
		c := newCollector(t)
		c.start()
		target, _ := url.Parse(c.httpEndpoint())
		proxy := httputil.NewSingleHostReverseProxy(target)
		var refused atomic.Int64
		refusing := atomic.Bool{}
		refusing.Store(true)
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if refusing.Load() {
				refused.Add(1)
				w.Header().Set("Retry-After", "1")
				http.Error(w, "memory limit reached", http.StatusServiceUnavailable)
				return
			}
			proxy.ServeHTTP(w, req)
		}))
		r := startPleg(t, churn, otlpArgs(srv, "--otlp-protocol", "http/protobuf")...)
		eventually(t, time.Minute, "refusals", func() bool { return refused.Load() >= 5 })
		refusing.Store(false)
		last := r.quiesce(2 * time.Minute)
		tl := account(c.records(), r.first(), last)
		check(t, tl, false)
		t.Logf("%d requests refused with 503 first", refused.Load())
		if got := r.metric(`pleg_export_records_failed_total{reason="retryable"}`); got <= 0 {
			t.Errorf("retryable failures counted: %v", got)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		var requests atomic.Int64
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			requests.Add(1)
			http.Error(w, "bad request", http.StatusBadRequest)
		}))
		r := startPleg(t, churn, otlpArgs(srv, "--otlp-protocol", "http/protobuf")...)
		eventually(t, time.Minute, "permanent failures counted", func() bool {
			return r.metric(`pleg_export_records_failed_total{reason="permanent"}`) > 0
		})
		last := r.quiesce(time.Minute)
		sent := r.metric("pleg_export_requests_total")
		// Each batch once (a loss record rides with the next): the count
		// of requests is the count of batches, nothing retried.
		if got := r.metric(`pleg_export_records_failed_total{reason="retryable"}`); got != 0 {
			t.Errorf("a 400 was retried: %v retryable failures", got)
		}
		if int64(sent) != requests.Load() || sent < 1 {
			t.Errorf("pleg counts %v requests, the server saw %d", sent, requests.Load())
		}
		if !strings.Contains(r.p.output(), "refused a batch for good") {
			t.Errorf("the log does not say the batch was refused for good:\n%s", tail(r.p.output(), 20))
		}
		t.Logf("a collector answering 400: %v requests, %v records failed for good, cursor at the last event %d",
			sent, r.metric(`pleg_export_records_failed_total{reason="permanent"}`), last)
	})
}

// An outage longer than the journal's retention (--event-buffer 100):
// the loss record names the numbers dropped, nothing else is missing.
func TestOutageLongerThanRetention(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	c.start()
	r := startPleg(t, churn, append(otlpArgs(c.grpcEndpoint()), "--event-buffer", "100")...)
	waitRecords(t, c, 20)
	c.stop()
	before := r.metric("pleg_export_cursor")
	// The journal holds 100; wait until it has given out three times that
	// since the cursor.
	eventually(t, 2*time.Minute, "the journal to drop unsent events", func() bool {
		_, floor := r.held()
		return floor > uint64(before)+200
	})
	c.start()
	last := r.quiesce(2 * time.Minute)
	c.waitFor(last)
	tl := account(c.records(), firstSeq(c.records()), last)
	check(t, tl, true)
	if tl.lossRecords == 0 || tl.lost < 100 {
		t.Errorf("the loss records name %d numbers in %d records, want at least the 100+ dropped", tl.lost, tl.lossRecords)
	}
	for _, rec := range c.records() {
		if rec.eventName == "pleg.EventsLost" {
			t.Logf("loss record: %d to %d, %s", rec.lostFrom, rec.lostTo, rec.lostReason)
			if rec.lostReason != "retention" || rec.lostFrom <= uint64(before) {
				t.Errorf("loss record %d..%d %q, want retention after the cursor %v", rec.lostFrom, rec.lostTo, rec.lostReason, before)
			}
		}
	}
	if got := r.metric(`pleg_export_records_lost_total{reason="retention"}`); got != float64(tl.lost) {
		t.Errorf("pleg counts %v lost, the loss records name %d", got, tl.lost)
	}
}

// firstSeq is the first number the collector received: the test's
// journal started with the exporter.
func firstSeq(recs []record) uint64 {
	for _, r := range recs {
		if r.eventName != "pleg.EventsLost" {
			return r.seq
		}
	}
	return 0
}
