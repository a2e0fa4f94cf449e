// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plegkit/pleg/journal"
)

// A notice reaches the collector while the exporter waits for events,
// after a refusal it retries, its body cut to MaxNoticeBody and its
// attributes kept.
func TestNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, err := journal.Open(journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = j.Close() }()
		fc := &fakeCollector{script: []answer{{err: &ExportError{Retryable: true, Status: "Unavailable", Err: status.Error(codes.Unavailable, "down")}}}}
		e, err := New(j, Options{Client: fc, Cursor: &MemoryCursor{}, Resource: Resource{NodeName: "node-1"},
			Jitter: func() float64 { return 0 }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = e.Run(ctx)
		}()
		synctest.Wait() // the exporter waits for events
		if !e.Notify(Notice{EventName: RecordingEventName, Time: time.Now(), Body: strings.Repeat("é", MaxNoticeBody),
			Attributes: map[string]string{"pleg.recording.name": "20261126T212233.123Z-stuck-process"}}) {
			t.Fatal("the notice was dropped")
		}
		time.Sleep(time.Minute) // past the retry's backoff
		synctest.Wait()
		cancel()
		<-done
		if len(fc.accepted) != 1 || len(fc.accepted[0]) != 1 {
			t.Fatalf("accepted %v, want the notice once (after %d requests)", fc.accepted, fc.requests)
		}
		r := fc.accepted[0][0]
		body := r.Body.GetStringValue()
		if r.EventName != RecordingEventName || len(body) > MaxNoticeBody || !strings.HasPrefix(body, "é") {
			t.Errorf("record %s, body of %d bytes", r.EventName, len(body))
		}
		attrs := map[string]string{}
		for _, kv := range r.Attributes {
			attrs[kv.Key] = kv.Value.GetStringValue()
		}
		if attrs["pleg.recording.name"] == "" || attrs["k8s.node.name"] != "node-1" {
			t.Errorf("attributes %v", attrs)
		}
		if fc.requests != 2 {
			t.Errorf("%d requests, want 2: one refused, one taken", fc.requests)
		}
	})
}

// The queue is bounded: past it a notice is dropped, not waited for.
func TestNoticesBounded(t *testing.T) {
	j, err := journal.Open(journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	e, err := New(j, Options{Client: &fakeCollector{}, Cursor: &MemoryCursor{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for range maxNotices + 3 {
		if !e.Notify(Notice{EventName: RecordingEventName}) {
			dropped++
		}
	}
	if dropped != 3 {
		t.Errorf("%d dropped, want 3", dropped)
	}
}
