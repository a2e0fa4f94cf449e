// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	collogspb "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/slim/otlp/logs/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
)

// answer is what the fake collector says to one request.
type answer struct {
	rejected int64
	msg      string
	err      error
}

// fakeCollector answers requests from a script, then accepts all, and
// keeps the records of the requests it accepted, and when each came.
type fakeCollector struct {
	mu       sync.Mutex
	script   []answer
	requests int
	accepted [][]*logspb.LogRecord
	times    []time.Time
}

func (f *fakeCollector) Export(_ context.Context, req *collogspb.ExportLogsServiceRequest) (int64, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	f.times = append(f.times, time.Now())
	var a answer
	if len(f.script) > 0 {
		a, f.script = f.script[0], f.script[1:]
	}
	if a.err == nil {
		f.accepted = append(f.accepted, req.ResourceLogs[0].ScopeLogs[0].LogRecords)
	}
	return a.rejected, a.msg, a.err
}

func (f *fakeCollector) Close() error { return nil }

// records returns the accepted records as "seq" for events and
// "lost(from..to reason)" for loss records, in order.
func (f *fakeCollector) records() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, b := range f.accepted {
		for _, r := range b {
			out = append(out, describe(r))
		}
	}
	return out
}

func describe(r *logspb.LogRecord) string {
	a := map[string]string{}
	for _, kv := range r.Attributes {
		switch {
		case kv.Value.GetStringValue() != "":
			a[kv.Key] = kv.Value.GetStringValue()
		default:
			a[kv.Key] = fmt.Sprint(kv.Value.GetIntValue())
		}
	}
	if r.EventName == LossEventName {
		return fmt.Sprintf("lost(%s..%s %s)", a["pleg.lost.first_seq"], a["pleg.lost.last_seq"], a["pleg.lost.reason"])
	}
	return a["pleg.seq"]
}

func testEvent(i int) pleg.Event {
	return pleg.Event{
		Type: pleg.ContainerStarted, PodUID: fmt.Sprintf("uid-%d", i), PodName: "web", PodNamespace: "shop",
		ContainerID: fmt.Sprintf("c%d", i), ContainerName: "nginx", Observed: time.Now(),
	}
}

func commitN(t *testing.T, j *journal.Journal, n int) {
	t.Helper()
	for i := range n {
		if err := j.Commit([]pleg.Event{testEvent(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func seqs(from, to uint64) []string {
	var out []string
	for s := from; s <= to; s++ {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// run is one exporter over an in-memory journal, in a synctest bubble.
type run struct {
	j      *journal.Journal
	fc     *fakeCollector
	cursor Cursor
	reg    *prometheus.Registry
	logs   *strings.Builder
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, j *journal.Journal, fc *fakeCollector, cursor Cursor, batch int) *run {
	t.Helper()
	r := &run{j: j, fc: fc, cursor: cursor, reg: prometheus.NewRegistry(), logs: &strings.Builder{}, done: make(chan struct{})}
	e, err := New(j, Options{
		Client: fc, Cursor: cursor, MaxBatch: batch, Resource: Resource{NodeName: "node-1", Version: "test"},
		Jitter: func() float64 { return 0 }, Registerer: r.reg, BehindEvents: 5,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{b: r.logs}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		_ = e.Run(ctx)
	}()
	return r
}

func (r *run) stop() {
	r.cancel()
	<-r.done
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func openJournal(t *testing.T, maxEvents int) *journal.Journal {
	t.Helper()
	j, err := journal.Open(journal.Options{MaxEvents: maxEvents, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// The exporter sends what the journal holds, in order, in bounded
// batches, retrying what the collector did not take and moving the
// cursor only past what it accepted.
func TestDelivery(t *testing.T) {
	retry := &ExportError{Retryable: true, Status: "503 Service Unavailable"}
	for _, tc := range []struct {
		name   string
		script []answer
		events int
		batch  int
		// want is the accepted records; wantRequests the attempts.
		want         func(first uint64) []string
		wantRequests int
		// wantWait is the least time the attempts took, from backoff.
		wantWait time.Duration
		metrics  map[string]float64
		log      string
	}{
		{
			name: "in order, in batches", events: 25, batch: 10,
			want:         func(f uint64) []string { return seqs(f, f+24) },
			wantRequests: 3,
			metrics:      map[string]float64{"pleg_export_records_total": 25},
		},
		{
			name: "retryable failures back off and deliver all", events: 10, batch: 10,
			script:       []answer{{err: retry}, {err: retry}, {err: fmt.Errorf("connection refused")}},
			want:         func(f uint64) []string { return seqs(f, f+9) },
			wantRequests: 4,
			// Jitter 0: half of 1 s, 2 s, 4 s.
			wantWait: 3500 * time.Millisecond,
			metrics: map[string]float64{
				"pleg_export_records_total": 10, `pleg_export_records_failed_total{reason="retryable"}`: 30,
			},
		},
		{
			name: "the backoff is capped", events: 3, batch: 10,
			script:       []answer{{err: retry}, {err: retry}, {err: retry}, {err: retry}, {err: retry}, {err: retry}, {err: retry}},
			want:         func(f uint64) []string { return seqs(f, f+2) },
			wantRequests: 8,
			// 0.5+1+2+4+8+15+15 s: 30 s is the cap, halved by the jitter.
			wantWait: 45500 * time.Millisecond,
		},
		{
			name: "Retry-After is honoured", events: 3, batch: 10,
			script:       []answer{{err: &ExportError{Retryable: true, RetryAfter: time.Minute, Status: "429"}}},
			want:         func(f uint64) []string { return seqs(f, f+2) },
			wantRequests: 2, wantWait: time.Minute,
		},
		{
			name: "a permanent error drops the batch with a loss record", events: 15, batch: 10,
			script: []answer{{err: &ExportError{Status: "400 Bad Request"}}},
			want: func(f uint64) []string {
				return append([]string{fmt.Sprintf("lost(%d..%d rejected)", f, f+9)}, seqs(f+10, f+14)...)
			},
			wantRequests: 2,
			metrics: map[string]float64{
				`pleg_export_records_failed_total{reason="permanent"}`: 10,
				`pleg_export_records_lost_total{reason="rejected"}`:    10,
				"pleg_export_records_total":                            5,
			},
			log: "refused a batch for good",
		},
		{
			name: "a collector refusing everything gets each batch once", events: 15, batch: 10,
			script: []answer{
				{err: &ExportError{Status: "400 Bad Request"}}, {err: &ExportError{Status: "400 Bad Request"}},
				{err: &ExportError{Status: "400 Bad Request"}},
			},
			want:         func(uint64) []string { return nil },
			wantRequests: 3,
			metrics: map[string]float64{
				`pleg_export_records_failed_total{reason="permanent"}`: 17,
				`pleg_export_records_lost_total{reason="rejected"}`:    15,
				`pleg_export_records_failed_total{reason="retryable"}`: 0,
			},
		},
		{
			name: "partial success is counted, not sent again", events: 10, batch: 10,
			script:       []answer{{rejected: 2, msg: "two too old"}},
			want:         func(f uint64) []string { return seqs(f, f+9) },
			wantRequests: 1,
			metrics:      map[string]float64{`pleg_export_records_failed_total{reason="rejected"}`: 2},
			log:          "two too old",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := openJournal(t, 0)
				first := j.Last() + 1
				commitN(t, j, tc.events)
				fc := &fakeCollector{script: tc.script}
				begin := time.Now()
				r := start(t, j, fc, &MemoryCursor{}, tc.batch)
				time.Sleep(time.Hour) // every backoff ends; the exporter then waits for events
				synctest.Wait()
				r.stop()
				if got, want := strings.Join(fc.records(), " "), strings.Join(tc.want(first), " "); got != want {
					t.Errorf("accepted:\n%s\nwant:\n%s", got, want)
				}
				if fc.requests != tc.wantRequests {
					t.Errorf("%d requests, want %d", fc.requests, tc.wantRequests)
				}
				if took := fc.times[len(fc.times)-1].Sub(begin); took < tc.wantWait {
					t.Errorf("the attempts took %v, want at least %v of backoff", took, tc.wantWait)
				}
				if got, _ := r.cursor.Load(j.ID()); got != j.Last() {
					t.Errorf("cursor %d, want the last event %d", got, j.Last())
				}
				checkMetrics(t, r.reg, tc.metrics)
				if !strings.Contains(r.logs.String(), tc.log) {
					t.Errorf("the log does not say %q:\n%s", tc.log, r.logs)
				}
			})
		})
	}
}

func checkMetrics(t *testing.T, reg *prometheus.Registry, want map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			if len(m.GetLabel()) > 0 {
				name += fmt.Sprintf("{%s=%q}", m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				got[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// Events the journal dropped before they were sent are named by a loss
// record, and the rest delivered; the log says when the exporter fell
// behind and when it caught up, once each.
func TestRetentionLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := openJournal(t, 10)
		first := j.Last() + 1
		commitN(t, j, 3)
		fc := &fakeCollector{}
		cursor := &MemoryCursor{}
		r := start(t, j, fc, cursor, 100)
		synctest.Wait()
		r.stop()
		// While no exporter runs, 30 events come and 20 go.
		commitN(t, j, 30)
		r = start(t, j, fc, cursor, 100)
		synctest.Wait()
		r.stop()
		want := append(seqs(first, first+2), fmt.Sprintf("lost(%d..%d retention)", first+3, first+22))
		want = append(want, seqs(first+23, first+32)...)
		if got := strings.Join(fc.records(), " "); got != strings.Join(want, " ") {
			t.Errorf("accepted:\n%s\nwant:\n%s", got, strings.Join(want, " "))
		}
		checkMetrics(t, r.reg, map[string]float64{
			`pleg_export_records_lost_total{reason="retention"}`: 20,
			"pleg_export_lag_events":                             0,
			"pleg_export_behind":                                 0,
		})
		logs := r.logs.String()
		for _, s := range []string{"falls behind", "caught up"} {
			if n := strings.Count(logs, s); n != 1 {
				t.Errorf("the log says %q %d times, want once:\n%s", s, n, logs)
			}
		}
	})
}

// A restarted exporter goes on after the file cursor: what was accepted
// is not sent again; the file names its journal.
func TestFileCursorResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		j := openJournal(t, 0)
		first := j.Last() + 1
		commitN(t, j, 5)
		fc := &fakeCollector{}
		cursor := FileCursor{Path: filepath.Join(dir, CursorFile)}
		r := start(t, j, fc, cursor, 100)
		synctest.Wait()
		r.stop()
		commitN(t, j, 3)
		r = start(t, j, fc, cursor, 100)
		synctest.Wait()
		r.stop()
		if got, want := strings.Join(fc.records(), " "), strings.Join(seqs(first, first+7), " "); got != want {
			t.Errorf("accepted:\n%s\nwant:\n%s", got, want)
		}
		if got, err := cursor.Load("another journal"); got != 0 || err != nil {
			t.Errorf("another journal's cursor: %d, %v; want 0", got, err)
		}
	})
}
