// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/plegkit/pleg"
)

// BenchmarkTake takes one recording of this host: its real /proc, its
// mounts, no runtime stacks; the store keeps one at a time.
func BenchmarkTake(b *testing.B) {
	calls := NewCalls(nil)
	r, err := New(Config{
		Dir: filepath.Join(b.TempDir(), "recordings"), MaxCount: 1, Calls: calls,
		Source:   &fakeSource{st: pleg.Status{RelistThreshold: 3 * time.Minute}},
		Endpoint: "unix:///run/containerd/containerd.sock",
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	b.ReportAllocs()
	for b.Loop() {
		rec, err := r.Take(b.Context(), TriggerManual, "benchmark", nil)
		if err != nil {
			b.Fatal(err)
		}
		list, _ := r.Store().List()
		if len(list) > 0 {
			size = list[len(list)-1].Bytes
		}
		_ = rec
	}
	b.ReportMetric(float64(size), "bytes/recording")
}
