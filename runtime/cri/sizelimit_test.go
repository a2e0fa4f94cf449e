// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// Issue 22 found the list limit (256 MiB a streamed list) above the
// DaemonSet's memory limit, with no flag and, for a unary list, gRPC's
// bare "received message larger than max". A list over the limit, here
// the simulator's padded lists of 17.5 MiB against a 16 MiB limit, now
// fails either way with an error that names the limit and what to do,
// and keeps gRPC's words (pleg doctor reads the size from them); the
// default limit fits the DaemonSet and passes these lists.
func TestListOverTheSizeLimitFromTheSimulator(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 10, Containers: 2, Faults: sim.Faults{OversizeLists: true}})
	for _, tc := range []struct {
		name      string
		streaming bool
		want      []string
	}{
		{"streamed", true, []string{"the 16 MiB a list's answer may have in all", "remove exited containers", "--max-list-size"}},
		{"unary", false, []string{"the ListContainers answer is one message larger than the 16 MiB a message accepted",
			"remove exited containers", "--max-list-size", "larger than max ("}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limited := newRuntime(t, cri.Options{Endpoint: s.Endpoint(), DisableStreaming: !tc.streaming,
				MaxRecvMsgSize: 16 << 20, MaxListBytes: 16 << 20})
			items, err := limited.ListContainers(t.Context(), nil)
			if status.Code(err) != codes.ResourceExhausted || items != nil {
				t.Fatalf("a 17.5 MiB list against a 16 MiB limit: %d items, %v; want ResourceExhausted", len(items), err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}

			byDefault := newRuntime(t, cri.Options{Endpoint: s.Endpoint(), DisableStreaming: !tc.streaming})
			if items, err := byDefault.ListContainers(t.Context(), nil); err != nil || len(items) != 20 {
				t.Errorf("the same list under the default limit of %d MiB: %d items, %v", cri.DefaultMaxListBytes>>20, len(items), err)
			}
		})
	}
}
