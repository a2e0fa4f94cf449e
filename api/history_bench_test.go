// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/journal/journaltest"
)

// fullJournal is a journal holding journal.DefaultMaxEvents events of
// 2,048 pods (32 each: a node's churn over days), and the UID of one.
func fullJournal(b *testing.B) (*journal.Journal, string) {
	b.Helper()
	const pods = 2048
	j := journaltest.Memory(journal.DefaultMaxEvents, 1)
	types := []pleg.EventType{pleg.ContainerStarted, pleg.ContainerDied, pleg.ContainerRemoved, pleg.PodSync}
	start := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	batch := make([]pleg.Event, 0, 256)
	for i := range journal.DefaultMaxEvents {
		p := i % pods
		ev := pleg.Event{Type: types[i/pods%len(types)], PodUID: fmt.Sprintf("8f14e45f-ceea-467f-a0e6-%012d", p),
			PodName: fmt.Sprintf("web-7d9c8b6f5-%05d", p), PodNamespace: "shop",
			ContainerID: fmt.Sprintf("4f1c2b3a5d6e7f8091a2b3c4d5e6f7084f1c2b3a5d6e7f8091a2b3c4d%08d", i), ContainerName: "nginx",
			Image: "registry.example.com/shop/nginx:1.27", Observed: start.Add(time.Duration(i) * time.Second)}
		if ev.Type == pleg.ContainerDied {
			code := int32(137)
			ev.ExitCode, ev.Reason = &code, "OOMKilled"
		}
		if batch = append(batch, ev); len(batch) == cap(batch) {
			if err := j.Commit(batch, nil); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if s := j.Status(); s.Events != journal.DefaultMaxEvents {
		b.Fatalf("the journal holds %d events (%d bytes), want %d", s.Events, s.Bytes, journal.DefaultMaxEvents)
	}
	return j, fmt.Sprintf("8f14e45f-ceea-467f-a0e6-%012d", 1234)
}

// BenchmarkHistory measures the answer to one pod's history from a full
// journal: the scan alone, and GET /v1/history over HTTP on loopback,
// JSON included, by UID and by namespace and name.
func BenchmarkHistory(b *testing.B) {
	j, uid := fullJournal(b)
	srv := NewServer(Options{Journal: j})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	for _, tc := range []struct {
		name string
		q    HistoryQuery
	}{
		{"ByUID", HistoryQuery{UID: uid}},
		{"ByName", HistoryQuery{Namespace: "shop", Name: "web-7d9c8b6f5-01234"}},
	} {
		b.Run("Scan"+tc.name, func(b *testing.B) {
			for b.Loop() {
				if h := ReadHistory(j, tc.q, time.Now()); len(h.Events) != 32 {
					b.Fatalf("%d events, want 32", len(h.Events))
				}
			}
		})
		b.Run("HTTP"+tc.name, func(b *testing.B) {
			u := ts.URL + "/v1/history?" + tc.q.Query().Encode()
			for b.Loop() {
				resp, err := http.Get(u)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n < 32*300 {
					b.Fatalf("%d, %d bytes", resp.StatusCode, n)
				}
			}
		})
	}
	b.Run("RemovedPod", func(b *testing.B) {
		for b.Loop() {
			if _, ok := ReadRemovedPod(j, uid); !ok {
				b.Fatal("not found")
			}
		}
	})
}
