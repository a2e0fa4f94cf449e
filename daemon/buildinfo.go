// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/version"
	"github.com/plegkit/pleg/metrics"
)

// versioner is a runtime that tells its name and version (the CRI adapter
// does): pleg_build_info carries them.
type versioner interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
}

// How pleg_build_info learns the runtime's version: asked at start, again
// after a failure with a backoff, and then now and again, since a runtime
// can be upgraded and restarted under a running pleg.
const (
	versionCallTimeout  = 10 * time.Second
	versionRetryMin     = time.Second
	versionRetryMax     = time.Minute
	versionRecheckEvery = 10 * time.Minute
)

func newBuildInfo(reg prometheus.Registerer) (*metrics.BuildInfo, error) {
	v := version.Get()
	return metrics.NewBuildInfo(reg, metrics.Build{Version: v.Version, Revision: v.Revision, GoVersion: v.GoVersion})
}

// watchRuntimeVersion keeps the runtime's name and version in bi until ctx
// ends. A runtime that does not answer is asked again; it never delays
// anything else.
func watchRuntimeVersion(ctx context.Context, rt versioner, bi *metrics.BuildInfo, log *slog.Logger) {
	backoff := wait.Backoff{Duration: versionRetryMin, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: versionRetryMax}
	for {
		next := versionRecheckEvery
		callCtx, cancel := context.WithTimeout(ctx, versionCallTimeout)
		v, err := rt.Version(callCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Debug("The runtime did not tell its version", "err", err)
			next = backoff.Step()
		default:
			b := bi.Current()
			b.RuntimeName, b.RuntimeVersion = v.GetRuntimeName(), v.GetRuntimeVersion()
			bi.Set(b)
			backoff.Duration, backoff.Steps = versionRetryMin, 1<<30
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
