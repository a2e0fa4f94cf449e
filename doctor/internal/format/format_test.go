// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package format

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                           "0s",
		412 * time.Microsecond:      "412µs",
		1500 * time.Nanosecond:      "1.5µs",
		12345 * time.Microsecond:    "12.3ms",
		999960 * time.Microsecond:   "1s",
		999700 * time.Nanosecond:    "1ms",
		59700 * time.Millisecond:    "1m0s",
		300 * time.Millisecond:      "300ms",
		4210 * time.Millisecond:     "4.21s",
		10 * time.Second:            "10s",
		2*time.Minute + time.Second: "2m1s",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}
