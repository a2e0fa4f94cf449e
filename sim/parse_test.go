// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/plegkit/pleg/runtime"
)

func TestParseChurn(t *testing.T) {
	c, err := ParseChurn("crash=2, exit=0.5,pods=0.1,short=1,tick=50ms")
	if err != nil {
		t.Fatal(err)
	}
	want := Churn{Crashes: 2, CleanExits: 0.5, PodReplacements: 0.1, ShortLived: 1, Tick: 50 * time.Millisecond}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if back, err := ParseChurn(c.String()); err != nil || back != c {
		t.Fatalf("round trip of %q: %+v, %v", c.String(), back, err)
	}
	if c, err := ParseChurn(""); err != nil || !c.IsZero() {
		t.Fatalf("empty churn: %+v, %v", c, err)
	}
	for _, bad := range []string{"crash", "crash=x", "crash=-1", "boom=1", "tick=0s", "tick=soon"} {
		if _, err := ParseChurn(bad); err == nil {
			t.Errorf("ParseChurn(%q) succeeded", bad)
		}
	}
}

func TestParseFaults(t *testing.T) {
	f, err := ParseFaults("error=container_status:0.05,error=*:0.01,error-code=internal,hang=list_containers,hang-pod=uid-1,slow-pod=uid-2:300ms,drop=30s,events=unimplemented,oversize,malformed=nil-metadata:2,malformed=unknown-state:1,malformed=duplicate-ids:3")
	if err != nil {
		t.Fatal(err)
	}
	if f.ErrorRate[runtime.OpContainerStatus] != 0.05 || f.ErrorRate["*"] != 0.01 || f.ErrorCode != codes.Internal ||
		!f.Hang[runtime.OpListContainers] || f.HangPod != "uid-1" || f.SlowPod["uid-2"] != 300*time.Millisecond || f.StreamDropEvery != 30*time.Second ||
		!f.EventsUnimplemented || !f.OversizeLists || f.Malformed != (Malformed{NilMetadata: 2, UnknownState: 1, DuplicateIDs: 3}) {
		t.Fatalf("parsed %+v", f)
	}
	back, err := ParseFaults(f.String())
	if err != nil || back.String() != f.String() {
		t.Fatalf("round trip of %q: %q, %v", f.String(), back.String(), err)
	}
	if f, err := ParseFaults(""); err != nil || f.String() != "none" {
		t.Fatalf("no faults: %q, %v", f.String(), err)
	}
	a := compileFaults(Faults{})
	if a.ErrorCode != codes.Unavailable {
		t.Errorf("default error code %v, want Unavailable", a.ErrorCode)
	}
	for _, bad := range []string{"error=list_containers", "error=nope:0.1", "error=list_containers:2", "hang=nope", "slow-pod=uid", "slow-pod=uid:0s", "slow-pod=:1s", "drop=0s", "events=on", "oversize=1", "malformed=bad:1", "malformed=nil-metadata:-1", "frobnicate", "error-code=teapot"} {
		if _, err := ParseFaults(bad); err == nil {
			t.Errorf("ParseFaults(%q) succeeded", bad)
		}
	}
}

func TestParseEventMode(t *testing.T) {
	for in, want := range map[string]EventMode{"": EventsContainerd, "containerd": EventsContainerd, "cri-o": EventsCRIO, "crio": EventsCRIO, "off": EventsOff} {
		if got, err := ParseEventMode(in); err != nil || got != want {
			t.Errorf("ParseEventMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseEventMode("docker"); err == nil {
		t.Error("ParseEventMode(docker) succeeded")
	}
}

// The seed-node preset's delays have the article's median and 99th
// percentile.
func TestLatencyPresetDistribution(t *testing.T) {
	m, err := LatencyPreset("seed-node")
	if err != nil {
		t.Fatal(err)
	}
	l := newLatencies(m, 1, nil)
	for name, want := range m {
		o, _ := lookupOp(name)
		samples := make([]time.Duration, 20000)
		for i := range samples {
			samples[i] = l.sample(o, 100) // no per-item cost: the figures are totals
		}
		slices.Sort(samples)
		p50, p99 := samples[len(samples)/2], samples[len(samples)*99/100]
		if math.Abs(float64(p50-want.P50))/float64(want.P50) > 0.05 || math.Abs(float64(p99-want.P99))/float64(want.P99) > 0.10 {
			t.Errorf("%s: p50 %v p99 %v, want %v and %v", name, p50, p99, want.P50, want.P99)
		}
	}
	zero, err := LatencyPreset("zero")
	if err != nil || len(zero) != 0 {
		t.Fatalf("zero preset: %v, %v", zero, err)
	}
	if _, err := LatencyPreset("fast"); err == nil {
		t.Error("unknown preset accepted")
	}
	l = newLatencies(LatencyModel{runtime.OpListContainers: {P50: time.Millisecond, PerItem: time.Microsecond}}, 1, nil)
	if d := l.sample(opListContainers, 1000); d != 2*time.Millisecond {
		t.Errorf("fixed 1ms + 1000 items × 1µs = %v, want 2ms", d)
	}
}
