// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plegkit/pleg/kubeletpleg"
)

// kubeletReadPeriod is how often the kubelet's metrics are read: its
// PLEG's last-seen moves every second; a read every 10 s keeps a
// kubelet's PLEG that stopped 90 s ago (half its threshold) within a
// scrape of being seen, for a read that costs the kubelet a metrics
// page.
const kubeletReadPeriod = 10 * time.Second

// kubeletWatch reads the kubelet's own PLEG every kubeletReadPeriod and
// keeps the last reading. Its methods are safe for concurrent use.
type kubeletWatch struct {
	src kubeletpleg.Source

	mu   sync.Mutex
	last kubeletpleg.Reading
	read bool
	ok   prometheus.Counter
	bad  prometheus.Counter
}

func newKubeletWatch(src kubeletpleg.Source, reg prometheus.Registerer) (*kubeletWatch, error) {
	w := &kubeletWatch{src: src}
	reads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pleg_kubelet_reads_total",
		Help: "Reads of the kubelet's own PLEG from its metrics, by result: ok, or error (refused, unreachable, " +
			"unreadable).",
	}, []string{"result"})
	w.ok, w.bad = reads.WithLabelValues("ok"), reads.WithLabelValues("error")
	lastSeen := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pleg_kubelet_pleg_last_seen_seconds",
		Help: "The kubelet's own kubelet_pleg_last_seen_seconds, as pleg last read it from the kubelet (every 10 s): " +
			"when the kubelet's PLEG last relisted; 0 before a read found it.",
	}, func() float64 {
		r, ok := w.Reading()
		if !ok || r.LastSeen.IsZero() {
			return 0
		}
		return float64(r.LastSeen.UnixNano()) / 1e9
	})
	behindAfter := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pleg_kubelet_pleg_behind_after_seconds",
		Help: "How old the kubelet's last-seen PLEG may grow before pleg calls it behind: half the kubelet's " +
			"3-minute threshold, 90; 450 with EventedPLEG, whose generic PLEG relists every 5 minutes against 10.",
	}, func() float64 {
		r, _ := w.Reading()
		return r.BehindAfter().Seconds()
	})
	for _, c := range []prometheus.Collector{reads, lastSeen, behindAfter} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Reading returns the last reading that found the kubelet's PLEG, and
// whether there is one: a read that failed keeps the one before, which
// ages as it should.
func (w *kubeletWatch) Reading() (kubeletpleg.Reading, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.read
}

// run reads the kubelet until ctx ends.
func (w *kubeletWatch) run(ctx context.Context) {
	for {
		r := w.src.Read(ctx)
		if ctx.Err() != nil {
			return
		}
		if r.Error != "" || r.LastSeen.IsZero() {
			w.bad.Inc()
		} else {
			w.ok.Inc()
			w.mu.Lock()
			w.last, w.read = r, true
			w.mu.Unlock()
		}
		t := time.NewTimer(kubeletReadPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// startKubeletWatch runs w, if any, and returns what stops it.
func startKubeletWatch(w *kubeletWatch) (stop func()) {
	if w == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
