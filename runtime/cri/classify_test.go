// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plegkit/pleg/runtime"
)

// What the end of an event stream says about the runtime. A runtime
// learns a probe's deadline and may end the stream cleanly just before
// the probe's own context fires: that stream was open.
func TestClassifyEvents(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		held bool
		want runtime.Capability
	}{
		{"event", nil, false, runtime.Capability{Availability: runtime.Supported, Detail: "an event arrived"}},
		{"unimplemented", status.Error(codes.Unimplemented, "unknown method"), false, runtime.Capability{Availability: runtime.Unsupported, Detail: "Unimplemented"}},
		{"ends at once", io.EOF, false, runtime.Capability{Availability: runtime.Unsupported, Detail: "the stream ends at once"}},
		{"ended by the runtime after a while", io.EOF, true, runtime.Capability{Availability: runtime.Supported, Detail: "stream open"}},
		{"our deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true, runtime.Capability{Availability: runtime.Supported, Detail: "stream open"}},
		{"canceled after a while", status.Error(codes.Canceled, "context canceled"), true, runtime.Capability{Availability: runtime.Supported, Detail: "stream open"}},
		{"fails early", status.Error(codes.Unavailable, "connection refused"), false, runtime.Capability{Availability: runtime.Unknown, Detail: "Unavailable: connection refused"}},
		{"fails after a while", status.Error(codes.Unavailable, "connection reset"), true, runtime.Capability{Availability: runtime.Unknown, Detail: "Unavailable: connection reset"}},
		{"deadline exceeded early", status.Error(codes.DeadlineExceeded, "deadline"), false, runtime.Capability{Availability: runtime.Unknown, Detail: "DeadlineExceeded: deadline"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyEvents(tc.err, tc.held); got != tc.want {
				t.Errorf("classifyEvents = %+v, want %+v", got, tc.want)
			}
		})
	}
}
