// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fleet measures what a fleet of pleg costs the cluster it reports
// to: N nodes on one machine, each a simulated runtime (`pleg sim`, with
// churn) watched by its own `pleg run` process, all reporting to one real
// kube-apiserver and scraped by one real Prometheus. It reads the API
// server's own request counters (apiserver_request_total, from its
// /metrics, every second) at rest, while every node's runtime hangs at
// once and when they all recover; what Prometheus scraped of the daemons
// (series, bytes, relist intervals) and what that cost it; and each
// daemon's CPU and memory from /proc. It prints the tables of
// docs/fleet.md, and fails if the fleet's requests ever pass the bound
// stated there, or if the machine does not keep up with the fleet.
//
// make test runs it with 10 nodes; make fleet with 10, 50 and 100
// (PLEG_FLEET_NODES), and a longer stretch at rest (PLEG_FLEET_REST);
// PLEG_FLEET_MODE and PLEG_FLEET_RELIST lighten the nodes on a small
// machine, PLEG_FLEET_OUT writes the tables to a file.
package fleet

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/plegkit/pleg/test/kube/kubetest"
)

// startAPIServer starts etcd and kube-apiserver for the test, or ends it
// as kubetest.Unavailable says: a failure under CI=true.
func startAPIServer(t *testing.T) *kubetest.Server {
	t.Helper()
	// Building kube-apiserver the first time takes minutes on 2 cores.
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	l := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
	srv, err := kubetest.Start(ctx, func(f string, a ...any) { _ = l.Output(2, fmt.Sprintf(f, a...)) })
	if err != nil {
		kubetest.Unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	return srv
}
