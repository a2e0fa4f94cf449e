// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtimecheck"
)

// newRuntimeCheck returns the runtime check over the runtime's Status,
// counted as the kubelet counts its own (operation_type="status"), or
// nil for a runtime without Status (an in-memory one).
func newRuntimeCheck(cfg Config, obs runtime.Observer) (*runtimecheck.Check, error) {
	sg, ok := cfg.Runtime.(runtimecheck.StatusGetter)
	if !ok {
		return nil, nil
	}
	return runtimecheck.New(runtimecheck.Config{
		Runtime: observedStatus{sg, obs},
		Logger:  cfg.Logger.With("component", "runtimecheck"),
	})
}

type observedStatus struct {
	rt  runtimecheck.StatusGetter
	obs runtime.Observer
}

func (o observedStatus) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	start := time.Now()
	resp, err := o.rt.Status(ctx, verbose)
	o.obs.Observe(runtime.OpStatus, time.Since(start), err)
	return resp, err
}

// startRuntimeCheck runs the check, if any, and returns what stops it.
func startRuntimeCheck(c *runtimecheck.Check) (stop func()) {
	if c == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// runtimeView is how the runtime answers, as the node condition and the
// unanswered gauge see it: the check's state, with its UnansweredSince
// taken back to the oldest of the node-wide calls left unanswered.
type runtimeView struct {
	gen   *pleg.Generator
	calls *flightrec.Calls
	check *runtimecheck.Check // nil for a runtime without Status
}

// State implements kubereport.RuntimeState.
func (v runtimeView) State() runtimecheck.State {
	var rs runtimecheck.State
	if v.check != nil {
		rs = v.check.State()
	}
	rs.UnansweredSince, rs.Unanswered = unanswered(v.gen.Status(), v.calls.InFlight(time.Now()), rs)
	return rs
}

// unanswered is since when the runtime has gone without answering pleg's
// node-wide calls, and which: its Status (the check), the whole-node
// lists in flight (calls), or lists failing (the generator's status);
// zero while it answers. A call in flight counts from its start: a
// healthy one is milliseconds old, and only an age past
// runtimecheck.Unanswered means anything. A relist's inspections do not
// count: a pod whose calls hang is PodStatusHung, not a runtime that does
// not answer.
func unanswered(st pleg.Status, inFlight []flightrec.Call, rs runtimecheck.State) (time.Time, string) {
	since, what := rs.UnansweredSince, rs.Unanswered
	earlier := func(t time.Time, calls string) {
		if !t.IsZero() && (since.IsZero() || t.Before(since)) {
			since, what = t, calls
		}
	}
	earlier(st.ListFailingSince, "its lists, which fail")
	for _, c := range inFlight {
		if c.ID == "" && (c.Op == runtime.OpListPodSandbox || c.Op == runtime.OpListContainers) {
			earlier(c.Start, "the whole-node "+c.Op)
			break // the oldest first
		}
	}
	return since, what
}

// newUnansweredGauge is pleg_runtime_unanswered_seconds: how long, at the
// scrape, the runtime has gone without answering. An age rather than a
// timestamp: a scrape that saw a healthy call in flight must not read, an
// interval later, as a call that has waited that long.
func newUnansweredGauge(v runtimeView) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pleg_runtime_unanswered_seconds",
		Help: "Seconds the container runtime has gone without answering pleg's node-wide calls (its Status, asked every " +
			"5 s as the kubelet does, and the whole-node lists); 0 while it answers.",
	}, func() float64 {
		t := v.State().UnansweredSince
		if t.IsZero() {
			return 0
		}
		return max(0, time.Since(t).Seconds())
	})
}

// newLatencyGauge is pleg_runtime_status_latency_seconds: the typical time
// of the runtime's last Status answers (runtimecheck.State.Latency).
func newLatencyGauge(v runtimeView) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pleg_runtime_status_latency_seconds",
		Help: "The median time of the container runtime's last five answers to pleg's Status calls, asked every 5 s as " +
			"the kubelet does; 0 before three. Healthy: milliseconds.",
	}, func() float64 { return v.State().Latency.Seconds() })
}
