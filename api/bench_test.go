// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal/journaltest"
	"github.com/plegkit/pleg/podcache"
)

// BenchmarkEventsTo10Clients measures how many events a second
// /v1/events delivers to 10 clients at once, each reading every event as
// NDJSON over HTTP on loopback.
func BenchmarkEventsTo10Clients(b *testing.B) {
	const clients = 10
	j := journaltest.Memory(1<<20, 1)
	srv := NewServer(Options{Cache: podcache.New(), Journal: j})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()

	ev := pleg.Event{Type: pleg.ContainerDied, PodUID: "8f14e45f-ceea-467f-a0e6-7e0ae1a3b2c4", PodName: "web-7d9c8b6f5-x2k4q",
		PodNamespace: "shop", ContainerID: "4f1c2b3a5d6e7f8091a2b3c4d5e6f7084f1c2b3a5d6e7f8091a2b3c4d5e6f708", ContainerName: "nginx", Observed: time.Now()}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	var ready, done sync.WaitGroup
	received := make([]int, clients)
	total := b.N
	for c := range clients {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/events?since=%d", ts.URL, j.Last()), nil)
			resp, err := http.DefaultClient.Do(req)
			ready.Done()
			if err != nil {
				return
			}
			defer resp.Body.Close()
			r := bufio.NewReaderSize(resp.Body, 1<<16)
			for received[c] < total {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				if len(line) > 1 {
					received[c]++
				}
			}
		}()
	}
	ready.Wait()
	b.ResetTimer()
	for range b.N {
		journaltest.Append(j, ev)
	}
	done.Wait()
	b.StopTimer()
	for c, n := range received {
		if n != b.N {
			b.Fatalf("client %d received %d of %d events", c, n, b.N)
		}
	}
	perClient := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(perClient, "events/s/client")
	b.ReportMetric(perClient*clients, "events/s")
}
