// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// startSim serves a simulated runtime for the test and returns it with
// the raw CRI client pleg doctor would use.
func startSim(t testing.TB, opts sim.Options) (*sim.Sim, runtimeapi.RuntimeServiceClient) {
	t.Helper()
	s := simtest.Start(t, opts)
	return s, dial(t, s.Endpoint())
}

// dial returns the raw client pleg doctor uses: our CRI adapter's.
func dial(t testing.TB, endpoint string) runtimeapi.RuntimeServiceClient {
	t.Helper()
	rt, err := cri.New(cri.Options{Endpoint: endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt.Client()
}

// testContext ends when the test must give up: a minute before go
// test's -timeout would end the binary (in an hour without one). Its
// calls are functional waits, never measurements.
func testContext(t testing.TB) context.Context {
	deadline := time.Now().Add(time.Hour)
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			deadline = d.Add(-time.Minute)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// virtualSim serves a simulated runtime whose time passes only when it
// waits, and returns that clock for the diagnosis to time calls with: a
// serial diagnosis then measures exactly the simulated latencies (zero,
// or a slow pod's delay), however busy the machine is.
func virtualSim(t testing.TB, opts sim.Options) (*sim.Sim, runtimeapi.RuntimeServiceClient, clock.PassiveClock) {
	t.Helper()
	clk := &virtualClock{now: time.Now()}
	opts.Clock = clk
	s, client := startSim(t, opts)
	return s, client, clk
}

// virtualClock is time that passes only when the simulator waits on it:
// every timer fires at once and moves the clock by its duration. Tickers
// (the churn) and After (containerd's backlog expiry) never fire: no test
// here churns or waits for the backlog to expire. Concurrent waits add
// up, so it times a serial diagnosis only.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *virtualClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(max(d, 0))
	return c.now
}

func (c *virtualClock) NewTimer(d time.Duration) clock.Timer {
	fired := make(chan time.Time, 1)
	fired <- c.advance(d)
	return firedTimer(fired)
}

func (c *virtualClock) Sleep(d time.Duration)                { c.advance(d) }
func (c *virtualClock) After(time.Duration) <-chan time.Time { return nil }
func (c *virtualClock) Tick(time.Duration) <-chan time.Time  { return nil }
func (c *virtualClock) NewTicker(time.Duration) clock.Ticker { return stoppedTicker{} }

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time      { return t }
func (t firedTimer) Stop() bool               { return false }
func (t firedTimer) Reset(time.Duration) bool { return false }

type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

// podUIDs lists the simulator's pod UIDs in its list order.
func podUIDs(t testing.TB, client runtimeapi.RuntimeServiceClient) []string {
	t.Helper()
	resp, err := client.ListPodSandbox(testContext(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, sb := range resp.GetItems() {
		uids = append(uids, sb.GetMetadata().GetUid())
	}
	return uids
}

// findingIDs lists the IDs of a report's findings, in rank order.
func findingIDs(r *Report) []string {
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.ID)
	}
	return ids
}

// finding returns the first finding with the ID, or nil.
func finding(r *Report, id string) *Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id {
			return &r.Findings[i]
		}
	}
	return nil
}

// diagnose runs a diagnosis that must not fail.
func diagnose(t testing.TB, client runtimeapi.RuntimeServiceClient, opts Options) *Report {
	t.Helper()
	r, err := Diagnose(testContext(t), client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
