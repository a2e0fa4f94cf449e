// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	collogspb "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
)

// discard is the cursor of a benchmark: nothing on disk.
type discard struct{ MemoryCursor }

// BenchmarkExport measures the export's throughput, journal to a
// collector on loopback that decodes every request, over both
// transports: records/s is the figure, allocations per record beside it.
//
//	go test -run '^$' -bench Export -benchmem -cpu 2 ./otlpexport/
func BenchmarkExport(b *testing.B) {
	for _, proto := range []string{ProtocolGRPC, ProtocolHTTP} {
		for _, comp := range []string{CompressionGzip, CompressionNone} {
			b.Run(fmt.Sprintf("%s/%s", proto, comp), func(b *testing.B) {
				benchExport(b, proto, comp)
			})
		}
	}
}

func benchExport(b *testing.B, protocol, compression string) {
	var endpoint string
	switch protocol {
	case ProtocolHTTP:
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body io.Reader = r.Body
			if r.Header.Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(r.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				body = zr
			}
			raw, _ := io.ReadAll(body)
			var req collogspb.ExportLogsServiceRequest
			if err := proto.Unmarshal(raw, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		b.Cleanup(srv.Close)
		endpoint = srv.URL
	default:
		s := &logsService{answer: func(*collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
			return &collogspb.ExportLogsServiceResponse{}, nil
		}}
		endpoint = serveLogs(b, s)
	}
	j, err := journal.Open(journal.Options{MaxEvents: max(b.N, 1), MaxBytes: 1 << 40, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	attempt, exit := uint32(2), int32(137)
	// Random IDs, as the runtime's are: gzip gets no help from them.
	rnd := rand.New(rand.NewPCG(1, 2))
	hex := func(n int) string {
		var sb strings.Builder
		for sb.Len() < n {
			fmt.Fprintf(&sb, "%016x", rnd.Uint64())
		}
		return sb.String()[:n]
	}
	uids := make([]string, 1000)
	for i := range uids {
		uids[i] = hex(32)
		uids[i] = uids[i][:8] + "-" + uids[i][8:12] + "-" + uids[i][12:16] + "-" + uids[i][16:20] + "-" + uids[i][20:]
	}
	evs := make([]pleg.Event, 0, 512)
	for i := 0; i < b.N; i += len(evs) {
		evs = evs[:0]
		for k := i; k < min(b.N, i+512); k++ {
			evs = append(evs, pleg.Event{
				Type: pleg.ContainerDied, PodUID: uids[k%1000],
				PodName: fmt.Sprintf("web-7d9f8c6b5-%05d", k%1000), PodNamespace: "shop", ContainerName: "nginx",
				ContainerID: hex(64), Observed: time.Now(), FinishedAt: time.Now(),
				Image: "registry.example/shop/nginx:1.27.3", Attempt: &attempt, ExitCode: &exit, Reason: "OOMKilled",
			})
		}
		if err := j.Commit(evs, nil); err != nil {
			b.Fatal(err)
		}
	}
	client, err := NewClient(TransportOptions{Endpoint: endpoint, Protocol: protocol, Insecure: true, Compression: compression})
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(j, Options{Client: client, Cursor: &discard{}, Resource: Resource{NodeName: "node-1"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		defer close(done)
		_ = e.Run(ctx)
	}()
	for testutil.ToFloat64(e.m.cursor) < float64(j.Last()) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	_ = e.Close()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	// The size of a record on the wire, before and after gzip.
	batch, _ := j.Read(j.Last()-min(uint64(b.N), 512), 512)
	e2 := &Exporter{opts: e.opts, j: j, m: e.m, scope: e.scope, cursor: batch[0].Seq - 1}
	raw, _ := proto.Marshal(e2.build(batch).req)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	b.ReportMetric(float64(len(raw))/float64(len(batch)), "B/record")
	b.ReportMetric(float64(zb.Len())/float64(len(batch)), "gzipB/record")
}
