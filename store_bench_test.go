// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// What keeping the journal on disk costs the event path: two generators
// over two identical in-memory runtimes, one with the default MemoryStore
// (off), one with a journal in a directory (on, synced every second),
// measured side by side, turn about, in one run. The in-memory runtime
// answers in microseconds, so what is measured is pleg's own cost, and the
// store's share of it is as large as it can be.

type storeSide struct {
	name string
	rt   *fakeruntime.Runtime
	g    *pleg.Generator
	sub  *pleg.Subscription
	jn   *journal.Journal
	dir  string
	lat  []time.Duration
}

func newStoreSide(b *testing.B, name string, persist bool, pods []fakeruntime.Pod) *storeSide {
	b.Helper()
	s := &storeSide{name: name, rt: fakeruntime.New(pods...)}
	s.rt.EnableEvents(true)
	opts := pleg.Options{
		EventedRelistPeriod: time.Hour, EventedRelistThreshold: 2 * time.Hour,
		Cache: podcache.New(), Logger: slog.New(slog.DiscardHandler),
	}
	if persist {
		s.dir = b.TempDir()
		var err error
		s.jn, err = journal.Open(journal.Options{Dir: s.dir, Logger: opts.Logger})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.jn.Close() })
		opts.Store = s.jn
	}
	var err error
	if s.g, err = pleg.New(s.rt, opts); err != nil {
		b.Fatal(err)
	}
	s.sub = s.g.Subscribe()
	s.g.Start()
	b.Cleanup(func() {
		s.g.Stop()
		s.sub.Close()
	})
	// The first relist reports every pod.
	want := 0
	for _, p := range pods {
		want += len(p.Sandboxes) + len(p.Containers)
	}
	s.next(b, want)
	return s
}

// next waits for n events.
func (s *storeSide) next(b *testing.B, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range n {
		if _, err := s.sub.Next(ctx); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
	}
}

// step moves the container of slot i one step on in its life (started,
// stopped, removed, then a new one) and times its event, from the
// runtime's send to the subscriber's receipt.
func (s *storeSide) step(b *testing.B, pod fakeruntime.Pod, i int) {
	id := fmt.Sprintf("c-%s-%d", pod.UID, i/3)
	var typ runtimeapi.ContainerEventType
	var events int
	switch i % 3 {
	case 0:
		s.rt.AddContainer(pod, fakeruntime.Container{ID: id, Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING})
		typ, events = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, 1
	case 1:
		if err := s.rt.SetContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED, 0); err != nil {
			b.Fatal(err)
		}
		typ, events = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, 1
	case 2:
		s.rt.Remove(id)
		typ, events = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, 1
	}
	start := time.Now()
	s.rt.Emit(pod.UID, id, typ, time.Time{})
	s.next(b, events)
	s.lat = append(s.lat, time.Since(start))
}

func percentile(d []time.Duration, p float64) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// BenchmarkStoreEventLatency: each op is one event on each side, from a
// payload applied at once. Reported: p50 and p99 per side in µs, the on/off
// ratio of each, and the bytes the journal wrote per event.
func BenchmarkStoreEventLatency(b *testing.B) {
	var pods []fakeruntime.Pod
	for i := range 20 {
		pods = append(pods, fakeruntime.Pod{UID: fmt.Sprintf("p%02d", i), Name: fmt.Sprintf("web-%02d", i), Namespace: "bench",
			Sandboxes: []fakeruntime.Sandbox{{ID: fmt.Sprintf("sb%02d", i), State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	}
	off := newStoreSide(b, "off", false, pods)
	on := newStoreSide(b, "on", true, pods)
	diskBefore := dirSize(b, on.dir)
	i := 0
	for b.Loop() {
		pod := pods[i%len(pods)]
		step := i / len(pods)
		// Turn about, so that neither side always goes first.
		if i%2 == 0 {
			off.step(b, pod, step)
			on.step(b, pod, step)
		} else {
			on.step(b, pod, step)
			off.step(b, pod, step)
		}
		i++
	}
	for _, s := range []*storeSide{off, on} {
		b.ReportMetric(float64(percentile(s.lat, 0.5).Nanoseconds())/1e3, s.name+"-p50-µs")
		b.ReportMetric(float64(percentile(s.lat, 0.99).Nanoseconds())/1e3, s.name+"-p99-µs")
	}
	b.ReportMetric(float64(percentile(on.lat, 0.5))/float64(percentile(off.lat, 0.5)), "p50-on/off")
	b.ReportMetric(float64(percentile(on.lat, 0.99))/float64(percentile(off.lat, 0.99)), "p99-on/off")
	b.ReportMetric(float64(dirSize(b, on.dir)-diskBefore)/float64(len(on.lat)), "disk-B/event")
}

// BenchmarkStoreRelistThroughput: each op is a global relist of 1,000 pods
// whose 3 containers all changed, on each side: 3,000 events a relist.
// Reported: ms per relist on each side and their ratio.
func BenchmarkStoreRelistThroughput(b *testing.B) {
	states := [2][]fakeruntime.Pod{}
	for k := range states {
		for i := range 1000 {
			p := fakeruntime.Pod{UID: fmt.Sprintf("p%04d", i), Name: fmt.Sprintf("web-%04d", i), Namespace: "bench"}
			for c := range 3 {
				// Each state has containers of its own: every relist
				// reports 3 removed and 3 started a pod.
				p.Containers = append(p.Containers, fakeruntime.Container{ID: fmt.Sprintf("c%d-%04d-%d", k, i, c), Name: fmt.Sprintf("c%d", c),
					State: runtimeapi.ContainerState_CONTAINER_RUNNING})
			}
			states[k] = append(states[k], p)
		}
	}
	type side struct {
		name  string
		rt    *fakeruntime.Runtime
		g     *pleg.Generator
		total time.Duration
	}
	mk := func(name string, store pleg.Store) *side {
		s := &side{name: name, rt: fakeruntime.New(states[0]...)}
		g, err := pleg.New(s.rt, pleg.Options{Mode: pleg.ModeGeneric, Store: store, Cache: podcache.New(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		s.g = g
		if err := g.Relist(b.Context()); err != nil {
			b.Fatal(err)
		}
		return s
	}
	jn, err := journal.Open(journal.Options{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = jn.Close() }()
	sides := []*side{mk("off", nil), mk("on", jn)}
	i := 0
	relist := func() {
		i++
		for j := range sides {
			s := sides[(i+j)%2]
			s.rt.SetPods(states[i%2]...)
			start := time.Now()
			if err := s.g.Relist(b.Context()); err != nil {
				b.Fatal(err)
			}
			s.total += time.Since(start)
		}
	}
	// Measure the steady state of a daemon that has run a while: the
	// journal's history full. It grows to MaxEvents as the first
	// relists fill it, copying itself as it doubles, once in its life.
	for floor := jn.Floor(); jn.Floor() == floor; {
		relist()
	}
	for _, s := range sides {
		s.total = 0
	}
	measured := i
	for b.Loop() {
		relist()
	}
	for _, s := range sides {
		b.ReportMetric(float64(s.total.Microseconds())/1e3/float64(i-measured), s.name+"-ms/relist")
	}
	b.ReportMetric(float64(sides[1].total)/float64(sides[0].total), "on/off")
}

// dirSize is what the files under dir hold, but the zeros they end with:
// the journal's segment ends with a preallocated tail.
func dirSize(b *testing.B, dir string) int64 {
	b.Helper()
	var size int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		size += int64(len(bytes.TrimRight(data, "\x00")))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}
