// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/runtime"
)

// OpLatency is how long one operation takes before the simulator answers:
// a lognormal delay with median P50 and 99th percentile P99, plus PerItem
// for each item a list returns. P99 at or below P50 makes the delay a
// constant P50.
type OpLatency struct {
	P50, P99 time.Duration
	PerItem  time.Duration
}

// LatencyModel maps operation names (runtime.OpListContainers, ...) to their
// latency; operations it leaves out answer at once.
type LatencyModel map[string]OpLatency

// Latency presets.
const (
	// LatencyZero answers every call at once.
	LatencyZero = "zero"
	// LatencySeedNode has the figures measured on the node of the seed
	// article: list_podsandbox p50 18 ms / p99 69 ms, list_containers
	// 30 / 81 ms, container_status 12 / 28 ms, podsandbox_status 5 / 18 ms.
	// They are totals per call, so there is no per-item cost.
	LatencySeedNode = "seed-node"
)

// LatencyPreset returns a new model for a preset name: "zero" or
// "seed-node".
func LatencyPreset(name string) (LatencyModel, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", LatencyZero:
		return LatencyModel{}, nil
	case LatencySeedNode:
		return LatencyModel{
			runtime.OpListPodSandbox:   {P50: 18 * time.Millisecond, P99: 69 * time.Millisecond},
			runtime.OpListContainers:   {P50: 30 * time.Millisecond, P99: 81 * time.Millisecond},
			runtime.OpContainerStatus:  {P50: 12 * time.Millisecond, P99: 28 * time.Millisecond},
			runtime.OpPodSandboxStatus: {P50: 5 * time.Millisecond, P99: 18 * time.Millisecond},
		}, nil
	}
	return nil, fmt.Errorf("latency preset %q: want %s or %s", name, LatencyZero, LatencySeedNode)
}

func (m LatencyModel) validate() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m)) {
		l := m[name]
		if _, ok := lookupOp(name); !ok {
			errs = append(errs, fmt.Errorf("latency: unknown operation %q", name))
		}
		if l.P50 < 0 || l.P99 < 0 || l.PerItem < 0 {
			errs = append(errs, fmt.Errorf("latency of %s: durations must not be negative", name))
		}
	}
	return errors.Join(errs...)
}

// z99 is the 99th percentile of the standard normal distribution.
const z99 = 2.3263478740408408

// opDelay is an OpLatency ready to sample: the lognormal's parameters in
// log-seconds.
type opDelay struct {
	mu, sigma float64
	fixed     time.Duration // used when sigma is 0
	max       time.Duration
	perItem   time.Duration
}

// latencies samples delays. Concurrent calls make the order of samples,
// and so each call's delay, nondeterministic; the distribution is not.
type latencies struct {
	ops   [numOps]opDelay
	clock clock.WithTicker
	mu    sync.Mutex
	rng   *rand.Rand
}

func newLatencies(m LatencyModel, seed uint64, clk clock.WithTicker) *latencies {
	l := &latencies{clock: clk, rng: rand.New(rand.NewPCG(seed, 0x6c61_7465_6e63_79))}
	for name, ol := range m {
		o, ok := lookupOp(name)
		if !ok {
			continue
		}
		d := opDelay{fixed: ol.P50, perItem: ol.PerItem}
		if ol.P50 > 0 && ol.P99 > ol.P50 {
			d.mu = math.Log(ol.P50.Seconds())
			d.sigma = math.Log(float64(ol.P99)/float64(ol.P50)) / z99
			// The lognormal's tail is unbounded; a rare draw of minutes
			// would only make benchmarks noisy.
			d.max = 10 * ol.P99
		}
		l.ops[o] = d
	}
	return l
}

// sample returns the delay of one call of o returning items items.
func (l *latencies) sample(o op, items int) time.Duration {
	d := &l.ops[o]
	total := d.perItem * time.Duration(items)
	if d.sigma == 0 {
		return total + d.fixed
	}
	l.mu.Lock()
	z := l.rng.NormFloat64()
	l.mu.Unlock()
	base := time.Duration(math.Exp(d.mu+d.sigma*z) * float64(time.Second))
	return total + min(base, d.max)
}

// wait delays a call of o by its sampled latency, or until ctx ends. It
// holds no lock while waiting.
func (l *latencies) wait(ctx context.Context, o op, items int) error {
	return sleep(ctx, l.clock, l.sample(o, items))
}

// sleep waits d on clk, or until ctx ends.
func sleep(ctx context.Context, clk clock.WithTicker, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
