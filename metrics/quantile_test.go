// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func TestHistogramQuantile(t *testing.T) {
	bucket := func(upper float64, count uint64) *dto.Bucket {
		return &dto.Bucket{UpperBound: proto.Float64(upper), CumulativeCount: proto.Uint64(count)}
	}
	h := &dto.Histogram{SampleCount: proto.Uint64(100), Bucket: []*dto.Bucket{
		bucket(0.1, 50), bucket(1, 90), bucket(10, 100), bucket(math.Inf(1), 100),
	}}
	for q, want := range map[float64]float64{0.25: 0.05, 0.5: 0.1, 0.7: 0.55, 0.95: 5.5, 1: 10} {
		if got := HistogramQuantile(h, q); math.Abs(got-want) > 1e-9 {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	// Observations past the last finite bucket: its bound, as Prometheus.
	h.Bucket[2].CumulativeCount = proto.Uint64(95)
	if got := HistogramQuantile(h, 0.99); got != 10 {
		t.Errorf("q0.99 past the buckets = %v, want 10", got)
	}
	if got := HistogramQuantile(&dto.Histogram{}, 0.5); got != 0 {
		t.Errorf("empty histogram: %v", got)
	}
}
