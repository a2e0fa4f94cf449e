// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plegkit/pleg/kubeletpleg"
)

// fakeKubelet answers reads as told.
type fakeKubelet struct {
	mu    sync.Mutex
	reads int
	next  kubeletpleg.Reading
}

func (f *fakeKubelet) Read(context.Context) kubeletpleg.Reading {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	r := f.next
	r.ReadAt = time.Now()
	return r
}

func (f *fakeKubelet) set(r kubeletpleg.Reading) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = r
}

func TestKubeletWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeKubelet{}
		reg := prometheus.NewRegistry()
		w, err := newKubeletWatch(src, reg)
		if err != nil {
			t.Fatal(err)
		}
		seen := time.Now().Add(-time.Second)
		src.set(kubeletpleg.Reading{LastSeen: seen})
		stop := startKubeletWatch(w)
		defer stop()
		synctest.Wait()
		if r, ok := w.Reading(); !ok || !r.LastSeen.Equal(seen) {
			t.Fatalf("first reading %+v, %v", r, ok)
		}
		if v := gauge(t, reg, "pleg_kubelet_pleg_last_seen_seconds"); v != float64(seen.UnixNano())/1e9 {
			t.Errorf("pleg_kubelet_pleg_last_seen_seconds = %v, want %v", v, float64(seen.UnixNano())/1e9)
		}
		// A kubelet that stops answering keeps the last reading, which
		// ages: its PLEG was last seen then.
		src.set(kubeletpleg.Reading{Error: "connection refused"})
		time.Sleep(time.Minute)
		synctest.Wait()
		if r, ok := w.Reading(); !ok || !r.LastSeen.Equal(seen) {
			t.Errorf("after failed reads: %+v, %v; want the last good one", r, ok)
		}
		if src.reads != 7 {
			t.Errorf("%d reads in a minute and a read, want 7 (every %v)", src.reads, kubeletReadPeriod)
		}
	})
}

// gauge is the value of the registry's gauge called name.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
