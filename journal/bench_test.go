// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
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

// relistEvents are a relist's events of pods pods, three containers each
// Died, Removed and Started, as BenchmarkStoreRelistThroughput commits
// them, with IDs as kubelet-like as the details test's.
func relistEvents(pods int) []pleg.Event {
	var events []pleg.Event
	for i := range pods {
		for c := range 3 {
			ev := detailed(i*3 + c)
			ev.PodUID, ev.PodName = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), fmt.Sprintf("web-%d", i)
			ev.ContainerID, ev.Observed = fmt.Sprintf("%064x", i*3+c), testNow
			for _, t := range []pleg.EventType{pleg.ContainerDied, pleg.ContainerRemoved, pleg.ContainerStarted} {
				ev.Type = t
				events = append(events, ev)
			}
		}
	}
	return events
}

// fullHistory is a journal in memory holding its default history of
// relists' events.
func fullHistory(b *testing.B) *Journal {
	j, err := Open(Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	events := relistEvents(100)
	for j.Status().Events < DefaultMaxEvents {
		if err := j.Commit(events, nil); err != nil {
			b.Fatal(err)
		}
	}
	return j
}

// BenchmarkHistoryMemory: the heap a full history (65,536 events of
// relists) keeps, per event held.
func BenchmarkHistoryMemory(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		j := fullHistory(b)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(j.Status().Events), "heap-B/event")
		runtime.KeepAlive(j)
	}
}

// BenchmarkRead: a client reading a full history from its start, in pages
// of 1,000 (GET /v1/history's); reported per entry read.
func BenchmarkRead(b *testing.B) {
	j := fullHistory(b)
	var page []Entry
	n := 0
	for b.Loop() {
		for after := uint64(0); ; {
			page, _ = j.ReadAppend(page, after, 1000)
			if len(page) == 0 {
				break
			}
			n += len(page)
			after = page[len(page)-1].Seq
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/entry")
}

// BenchmarkCommitBesideReader: single-event commits, as the evented path
// makes them, while a client reads the full history over and over in
// pages of 1,000 (GET /v1/history's): what a reader costs a commit
// waiting on the journal's lock. Each op is 100 commits alone, then
// commits beside the reader until it has read the history through twice.
// Reported: the commits' p50 and p99 in µs, alone and beside the reader.
func BenchmarkCommitBesideReader(b *testing.B) {
	j := fullHistory(b)
	ev, pods := event(0), []pleg.PodReport{report("pod-0", "c-0")}
	var alone, beside []time.Duration
	commit := func(into *[]time.Duration) {
		start := time.Now()
		if err := j.Commit([]pleg.Event{ev}, pods); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	for b.Loop() {
		for range 100 {
			commit(&alone)
		}
		var passes atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			var page []Entry
			for {
				for after := uint64(0); ; {
					select {
					case <-stop:
						return
					default:
					}
					page, _ = j.ReadAppend(page, after, 1000)
					if len(page) == 0 {
						break
					}
					after = page[len(page)-1].Seq
				}
				passes.Add(1)
			}
		}()
		for passes.Load() < 2 {
			commit(&beside)
		}
		close(stop)
		<-done
	}
	for _, s := range []struct {
		name string
		d    []time.Duration
	}{{"alone", alone}, {"beside", beside}} {
		slices.Sort(s.d)
		b.ReportMetric(float64(s.d[len(s.d)/2].Nanoseconds())/1e3, s.name+"-p50-µs")
		b.ReportMetric(float64(s.d[len(s.d)*99/100].Nanoseconds())/1e3, s.name+"-p99-µs")
	}
}
