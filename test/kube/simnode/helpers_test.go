// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package simnode

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func TestSubHistogram(t *testing.T) {
	hist := func(count uint64, sum float64, buckets ...uint64) *dto.Histogram {
		h := &dto.Histogram{SampleCount: proto.Uint64(count), SampleSum: proto.Float64(sum)}
		for i, c := range buckets {
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(float64(i + 1)), CumulativeCount: proto.Uint64(c)})
		}
		return h
	}
	got := sub(hist(10, 12, 4, 9, 10), hist(3, 2, 2, 3, 3))
	want := hist(7, 10, 2, 6, 7)
	if !proto.Equal(got, want) {
		t.Errorf("sub: %v, want %v", got, want)
	}
}

func TestUnhealthy(t *testing.T) {
	for _, tt := range []struct {
		log  string
		want int
	}{
		{"", 0},
		{`E1126 kubelet.go:1] "Skipping pod synchronization" err="PLEG is not healthy: pleg has yet to be successful"` + "\n", 0},
		{`E1126 kubelet.go:1] "Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m0.1s ago; threshold is 3m0s"` + "\n" +
			`I1126 other line` + "\n" +
			`E1126 kubelet.go:1] "Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s"`, 2},
	} {
		if got := unhealthy([]byte(tt.log)); got != tt.want {
			t.Errorf("unhealthy(%q) = %d, want %d", tt.log, got, tt.want)
		}
	}
}

func TestUnimplemented(t *testing.T) {
	log := `E1126 remote_runtime.go:1094] "ReopenContainerLog from runtime service failed" err="rpc error: code = Unimplemented desc = method ReopenContainerLog not implemented" containerID="92"
E1126 container_log_manager.go:250] "Container log doesn't exist, reopen container log failed" err="rpc error: code = Unimplemented desc = method ReopenContainerLog not implemented"
E1126 x.go:1] "X failed" err="rpc error: code = Unimplemented desc = unknown method GetContainerEvents for service runtime.v1.RuntimeService"
I1126 other line
`
	got := unimplemented([]byte(log))
	if len(got) != 2 || got["ReopenContainerLog"] != 2 || got["GetContainerEvents"] != 1 {
		t.Errorf("unimplemented: %v, want ReopenContainerLog 2 and GetContainerEvents 1", got)
	}
}
