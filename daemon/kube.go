// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/runtime"
)

// newKubeReporter returns the reporter into the Kubernetes API that
// cfg.Kube asks for, or nil. It reads the generator's status and, when the
// runtime tells them, its list sizes; its counter joins reg.
func newKubeReporter(cfg Config, gen *pleg.Generator, rt kubereport.RuntimeState, kubelet *kubeletWatch,
	reg prometheus.Registerer,
) (*kubereport.Reporter, error) {
	if cfg.Kube == nil {
		return nil, nil
	}
	kc := *cfg.Kube
	kc.Logger = cfg.Logger.With("component", "kubereport")
	kc.Registerer = reg
	if sizes, ok := cfg.Runtime.(runtime.ListSizer); ok && kc.Sizes == nil {
		kc.Sizes = sizes
	}
	if kc.Runtime == nil {
		kc.Runtime = rt
	}
	if kc.Kubelet == nil && kubelet != nil {
		kc.Kubelet = kubelet
	}
	return kubereport.New(gen, kc)
}

// startKube runs the reporter, if any, beside the generator and returns
// what stops it. The reporter never blocks the generator, the journal or
// the API: it only reads the generator's status.
func startKube(r *kubereport.Reporter, log *slog.Logger) (stop func()) {
	if r == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			log.Error("Reporting to the Kubernetes API stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
