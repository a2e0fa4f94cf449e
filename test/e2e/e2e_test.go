// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e runs the generator over the CRI adapter against real,
// private runtimes started by internal/testing/runtimetest: each test runs once
// for every runtime of the matrix (runtimetest.Matrix: by default the
// oldest and newest supported containerd and CRI-O with pod events on and
// off), in a subtest named after it, e.g.
// TestRemovals/containerd-v1.7.35. The runtimes of one test run in
// parallel. Under CI=true a test that cannot get its runtime fails;
// elsewhere (not root, say) it is skipped and says why.
package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/cri"
)

// runtimes holds one instance of each runtime, shared by the tests.
var runtimes = runtimetest.NewPool()

// binDir holds what the tests build, pleg itself.
var binDir string

func TestMain(m *testing.M) {
	if err := runtimetest.RunAllAtOnce(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var err error
	if binDir, err = os.MkdirTemp("", "pleg-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	_ = os.RemoveAll(binDir)
	if err := runtimes.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the runtimes:", err)
		code = 1
	}
	os.Exit(code)
}

// matrix returns the runtimes the tests run against.
func matrix(t testing.TB) []runtimetest.Spec {
	t.Helper()
	specs, err := runtimetest.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

// onEachRuntime runs f against each runtime of the matrix, in parallel
// subtests named after them. A runtime that cannot be had fails its
// subtest under CI=true and skips it elsewhere.
func onEachRuntime(t *testing.T, f func(t *testing.T, in *runtimetest.Instance)) {
	for _, spec := range matrix(t) {
		t.Run(spec.String(), func(t *testing.T) {
			t.Parallel()
			f(t, runtimes.Get(t, spec))
		})
	}
}

// runtimeName is the name a runtime gives in its CRI Version answer.
func runtimeName(spec runtimetest.Spec) string {
	if spec.Kind == runtimetest.CRIO {
		return "cri-o"
	}
	return "containerd"
}

// newPod names a pod no other test uses.
func newPod(name string) runtimetest.PodSpec {
	return runtimetest.PodSpec{UID: rand.Text()[:16], Name: name, Namespace: "e2e"}
}

// watcher runs a generator over the CRI adapter and records every event it
// delivers.
type watcher struct {
	gen   *pleg.Generator
	cache *podcache.Cache

	mu     sync.Mutex
	events []pleg.Event
	// received holds when each of events reached the subscriber.
	received []time.Time
}

func watch(t *testing.T, in *runtimetest.Instance, opts pleg.Options) *watcher {
	t.Helper()
	rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return watchRuntime(t, rt, opts)
}

// watchRuntime is watch over the given adapter.
func watchRuntime(t *testing.T, rt *cri.Runtime, opts pleg.Options) *watcher {
	t.Helper()
	w := &watcher{cache: podcache.New()}
	if opts.RelistPeriod == 0 {
		opts.RelistPeriod = 100 * time.Millisecond
	}
	opts.Cache = w.cache
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var err error
	w.gen, err = pleg.New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	sub := w.gen.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.received = append(w.received, time.Now())
			w.mu.Unlock()
		}
	}()
	w.gen.Start()
	t.Cleanup(func() {
		w.gen.Stop()
		cancel()
		<-done
		sub.Close()
	})
	return w
}

// testWriter sends the generator's warnings to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// all returns every event recorded.
func (w *watcher) all() []pleg.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// receivedAt returns when the first event of type typ about id reached
// the subscriber.
func (w *watcher) receivedAt(id string, typ pleg.EventType) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, ev := range w.events {
		if ev.ContainerID == id && ev.Type == typ {
			return w.received[i], true
		}
	}
	return time.Time{}, false
}

// of returns the events recorded for pod uid.
func (w *watcher) of(uid string) []pleg.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []pleg.Event
	for _, ev := range w.events {
		if ev.PodUID == uid {
			out = append(out, ev)
		}
	}
	return out
}

// count returns how many events of type typ pod uid had for id.
func (w *watcher) count(uid, id string, typ pleg.EventType) int {
	n := 0
	for _, ev := range w.of(uid) {
		if ev.ContainerID == id && ev.Type == typ {
			n++
		}
	}
	return n
}

// types returns the types of pod uid's events for id, in order.
func (w *watcher) types(uid, id string) []pleg.EventType {
	var out []pleg.EventType
	for _, ev := range w.of(uid) {
		if ev.ContainerID == id {
			out = append(out, ev.Type)
		}
	}
	return out
}

// wait polls cond until it holds, for at most a minute: long enough for a
// loaded CI machine, and what is asserted is what happens, not how fast.
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitEvents waits until pod uid's events for id are want.
func (w *watcher) waitEvents(t *testing.T, uid, id string, want ...pleg.EventType) {
	t.Helper()
	wait(t, fmt.Sprintf("%v for %s", want, id), func() bool { return slices.Equal(w.types(uid, id), want) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}
