// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/plegkit/pleg"
)

// BenchmarkCommit: one event and its pod's report a commit, as the
// evented path commits, in memory and in a directory synced every second
// or at every commit.
func BenchmarkCommit(b *testing.B) {
	for _, tc := range []struct {
		name string
		dir  bool
		sync time.Duration
	}{{"memory", false, 0}, {"disk", true, 0}, {"disk-sync-always", true, SyncAlways}} {
		b.Run(tc.name, func(b *testing.B) {
			o := Options{Sync: tc.sync, Logger: slog.New(slog.DiscardHandler)}
			if tc.dir {
				o.Dir = b.TempDir()
			}
			j, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = j.Close() }()
			events := []pleg.Event{event(0)}
			pods := []pleg.PodReport{report("pod-0", "c-0", "c-1", "c-2")}
			for b.Loop() {
				if err := j.Commit(events, pods); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCommitRelist: what a relist of 1,000 pods whose 3 containers
// all changed commits at once (BenchmarkStoreRelistThroughput's): 6,000
// events and 1,000 reports.
func BenchmarkCommitRelist(b *testing.B) {
	var events []pleg.Event
	var pods []pleg.PodReport
	for i := range 1000 {
		uid := fmt.Sprintf("pod-%04d", i)
		ids := []string{fmt.Sprintf("c-%04d-0", i), fmt.Sprintf("c-%04d-1", i), fmt.Sprintf("c-%04d-2", i)}
		for k, id := range ids {
			ev := event(i*6 + k)
			ev.PodUID, ev.ContainerID = uid, id
			events = append(events, ev)
			ev.Type = pleg.ContainerRemoved
			events = append(events, ev)
		}
		pods = append(pods, report(uid, ids...))
	}
	for _, dir := range []bool{false, true} {
		b.Run(map[bool]string{false: "memory", true: "disk"}[dir], func(b *testing.B) {
			o := Options{Logger: slog.New(slog.DiscardHandler)}
			if dir {
				o.Dir = b.TempDir()
			}
			j, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = j.Close() }()
			for b.Loop() {
				if err := j.Commit(events, pods); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen: starting on a full store of the default retention
// (65,536 events) of 100 pods.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	o := Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
	j, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	for i := range DefaultMaxEvents {
		ev := event(i)
		ev.PodUID = fmt.Sprintf("pod-%03d", i%100)
		if err := j.Commit([]pleg.Event{ev}, []pleg.PodReport{report(ev.PodUID, ev.ContainerID, "sidecar")}); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		j, err := Open(o)
		if err != nil {
			b.Fatal(err)
		}
		if s := j.Status(); s.Events != DefaultMaxEvents {
			b.Fatalf("opened with %d events, want %d", s.Events, DefaultMaxEvents)
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
