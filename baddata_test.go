// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// syncBuffer is a log sink safe for the generator's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the JSON log records written so far.
func (b *syncBuffer) records(t testing.TB) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	dec := json.NewDecoder(bytes.NewReader(b.buf.Bytes()))
	for dec.More() {
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("bad log record: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func withLogger(l *slog.Logger) envOption { return func(o *Options) { o.Logger = l } }

func labels(uid, name string) map[string]string {
	return map[string]string{runtime.PodUIDLabel: uid, runtime.PodNameLabel: name, runtime.PodNamespaceLabel: "ns"}
}

func TestBadRuntimeData(t *testing.T) {
	good := fakeruntime.Pod{UID: "good", Name: "good", Namespace: "ns",
		Sandboxes:  []fakeruntime.Sandbox{sbx("s-good", ready)},
		Containers: []fakeruntime.Container{ctr("c-good", running)},
	}
	snap := fakeruntime.NewSnapshot(good)
	md := func(uid, name string) *runtimeapi.PodSandboxMetadata {
		return &runtimeapi.PodSandboxMetadata{Uid: uid, Name: name, Namespace: "ns"}
	}
	cmd := &runtimeapi.ContainerMetadata{Name: "app"}
	snap.AddRaw(
		[]*runtimeapi.PodSandbox{
			nil,
			{Id: "", Metadata: md("bad", "bad")},
			{Id: "s-nometa"},
			// One pod UID under two names.
			{Id: "s-twin1", Metadata: md("twin", "first"), State: ready},
			{Id: "s-twin2", Metadata: md("twin", "second"), State: ready},
		},
		[]*runtimeapi.Container{
			nil,
			{Id: "", Metadata: cmd, Labels: labels("good", "good")},
			// A state CRI does not define.
			{Id: "c-weird", Metadata: cmd, State: runtimeapi.ContainerState(9), Labels: labels("good", "good")},
			// No metadata: named from its label.
			{Id: "c-nometa", State: running, Labels: map[string]string{runtime.PodUIDLabel: "good", runtime.ContainerNameLabel: "sidecar"}},
			// Listed twice.
			{Id: "c-dup", Metadata: cmd, State: running, Labels: labels("good", "good")},
			{Id: "c-dup", Metadata: cmd, State: exited, Labels: labels("good", "good")},
			// No pod label, and its sandbox is not listed.
			{Id: "c-orphan", PodSandboxId: "s-gone", Metadata: cmd, State: running},
		},
		nil,
		map[string]*runtimeapi.ContainerStatus{
			"c-weird":  {Id: "c-weird", Metadata: cmd, State: runtimeapi.ContainerState(9)},
			"c-nometa": {Id: "c-nometa", State: running},
			"c-dup":    {Id: "c-dup", Metadata: cmd, State: running},
		},
	)
	rt := fakeruntime.New()
	rt.Load(snap)
	var logs syncBuffer
	e := newEnv(t, rt, withLogger(slog.New(slog.NewJSONHandler(&logs, nil))))

	first := e.relist()
	assertEvents(t, first,
		startedEv("good", "c-dup"), startedEv("good", "c-good"), startedEv("good", "c-nometa"), startedEv("good", "s-good"),
		startedEv("twin", "s-twin1"), startedEv("twin", "s-twin2"))
	for _, ev := range first {
		if ev.ContainerID == "c-nometa" && ev.ContainerName != "sidecar" {
			t.Errorf("container without metadata named %q, want its label's %q", ev.ContainerName, "sidecar")
		}
		if ev.PodUID == "twin" && ev.PodName != "first" {
			t.Errorf("pod listed under two names delivered as %q, want the first, %q", ev.PodName, "first")
		}
	}
	// The same bad items again: counted and logged once.
	e.relist()

	wantCounts := map[string]float64{
		invalidNilItem:         2,
		invalidEmptyID:         2,
		invalidNilMetadata:     2,
		invalidUnknownState:    1,
		invalidDuplicateID:     1,
		invalidNoPod:           1,
		invalidPodNameConflict: 1,
	}
	for reason, want := range wantCounts {
		if got := testutil.ToFloat64(e.g.metrics.InvalidItems.WithLabelValues(reason)); got != want {
			t.Errorf("pleg_invalid_runtime_items_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	warnings := map[string]int{}
	for _, r := range logs.records(t) {
		if r["level"] == "WARN" {
			warnings[r["reason"].(string)]++
		}
	}
	for reason, want := range wantCounts {
		if warnings[reason] != int(want) {
			t.Errorf("%d warnings for %s, want %d", warnings[reason], reason, int(want))
		}
	}

	// Once the runtime drops a bad item it may come back and is reported again.
	rt.SetPods(good)
	e.relist()
	rt.Load(snap)
	e.relist()
	if got := testutil.ToFloat64(e.g.metrics.InvalidItems.WithLabelValues(invalidDuplicateID)); got != 2 {
		t.Errorf("duplicate reported %v times after it came back, want 2", got)
	}
}
