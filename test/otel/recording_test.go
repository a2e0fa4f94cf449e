// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otel

import (
	"strings"
	"testing"
	"time"
)

// A flight recording's summary and findings reach the collector at the
// onset, beside the events, as one log record: the evidence outlives a
// node that is drained and recycled. The runtime's container list hangs;
// pleg records the incident and ships its summary.
func TestRecordingSummaryReachesTheCollector(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	c.start()
	start := time.Now()
	startPlegOver(t,
		[]string{"--pods", "3", "--containers", "1", "--latency", "zero", "--churn", "", "--faults", "hang=list_containers"},
		otlpArgs(c.grpcEndpoint(), "--relist-threshold", "3s", "--timeout", "5s")...)
	var got record
	eventually(t, 2*time.Minute, "a flight recording's summary at the collector", func() bool {
		for _, r := range c.records() {
			if r.eventName == "pleg.FlightRecording" {
				got = r
				return true
			}
		}
		return false
	})
	t.Logf("received %v after pleg started: %s\nattributes: %v", time.Since(start).Round(100*time.Millisecond), got.body, got.attrs)
	name := got.attrs["pleg.recording.name"]
	if name == "" || got.attrs["pleg.recording.trigger"] == "" || got.attrs["pleg.finding.count"] == "" {
		t.Errorf("attributes %v: want the recording's name, trigger and findings", got.attrs)
	}
	if got.node == "" || got.journal == "" {
		t.Errorf("resource: node %q, journal %q", got.node, got.journal)
	}
	for _, want := range []string{"pleg flight recording " + name, "kubectl pleg recordings " + got.node + " " + name} {
		if !strings.Contains(got.body, want) {
			t.Errorf("body lacks %q:\n%s", want, got.body)
		}
	}
	if len(got.body) > 4096 {
		t.Errorf("body of %d bytes, past the bound", len(got.body))
	}
}
