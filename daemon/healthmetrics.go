// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plegkit/pleg"
)

// registerHealthMetrics exports, read at each scrape, what an alert needs
// whether or not pleg reports into Kubernetes (pleg_node_condition exists
// only then): pleg_healthy, /healthz as a number, and
// pleg_evented_stream_down_seconds, for how long an event stream that the
// mode asks for and the runtime has is down (pleg_evented_stream_connected
// reads 0 in generic mode and on a runtime without a stream as well), and
// pleg_pods_hung, the pods whose status calls do not answer.
func registerHealthMetrics(reg prometheus.Registerer, checks []pleg.HealthCheck, gen *pleg.Generator) error {
	healthy := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pleg_healthy",
		Help: "1 while /healthz answers 200 (the kubelet's \"PLEG is healthy\"), else 0.",
	}, func() float64 {
		for _, c := range checks {
			if ok, _ := c.Healthy(); !ok {
				return 0
			}
		}
		return 1
	})
	down := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pleg_evented_stream_down_seconds",
		Help: "Seconds the CRI container event stream has been down, while the mode (auto or evented) asks for it and " +
			"the runtime has one; 0 while it is connected, in generic mode, or on a runtime without a stream.",
	}, func() float64 { return streamDown(gen.Status(), time.Now()).Seconds() })
	hung := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pleg_pods_hung",
		Help: "Pods whose status calls do not answer: their latest inspection passed its deadline. The kubelet waits up " +
			"to its runtime request timeout (2 min) for each such call in every relist.",
	}, func() float64 {
		n := 0
		for _, f := range gen.Status().FailingPods {
			if f.Hung() {
				n++
			}
		}
		return float64(n)
	})
	return errors.Join(reg.Register(healthy), reg.Register(down), reg.Register(hung))
}

// streamDown is how long a wanted event stream has been down in st.
func streamDown(st pleg.Status, now time.Time) time.Duration {
	if st.Mode == pleg.ModeGeneric || st.NoStream || st.StreamConnected || st.StreamSince.IsZero() {
		return 0
	}
	return max(0, now.Sub(st.StreamSince))
}
