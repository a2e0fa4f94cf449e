// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// --event-retention takes Prometheus' durations, days and weeks included.
func TestEventRetentionFlag(t *testing.T) {
	for _, tc := range []struct {
		value, shown string
		want         time.Duration
		err          string
	}{
		{value: "7d", want: 7 * 24 * time.Hour, shown: "1w"},
		{value: "168h", want: 7 * 24 * time.Hour, shown: "1w"},
		{value: "36h", want: 36 * time.Hour, shown: "1d12h"},
		{value: "0", want: 0, shown: "0"},
		{value: "-1h", err: "want a duration such as 7d"},
		{value: "a week", err: "want a duration such as 7d"},
	} {
		var d time.Duration
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fs.Var(&retentionFlag{&d}, "event-retention", "")
		err := fs.Parse([]string{"--event-retention", tc.value})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--event-retention %s: %v, want %q", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil || d != tc.want {
			t.Errorf("--event-retention %s: %v, %v; want %v", tc.value, d, err, tc.want)
		}
		if got := (&retentionFlag{&d}).String(); got != tc.shown {
			t.Errorf("--event-retention %s shows %q, want %q", tc.value, got, tc.shown)
		}
	}
}
