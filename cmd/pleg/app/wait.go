// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// versioner is the call that tells a runtime answers.
type versioner interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
}

// waitForRuntime returns once the runtime answers Version. Until then it
// says once that it waits, tries again with a growing pause, and gives up
// after wait (0: never).
func (g *global) waitForRuntime(ctx context.Context, rt versioner, wait time.Duration) error {
	backoff := 100 * time.Millisecond
	var since time.Time
	for {
		_, err := rt.Version(ctx)
		if err == nil {
			if !since.IsZero() {
				g.log.Info("The runtime answers", "endpoint", g.endpoint, "waited", time.Since(since).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if since.IsZero() {
			since = time.Now()
			g.log.Warn("Waiting for the runtime", "endpoint", g.endpoint, "err", err, "giveUpAfter", waitWord(wait))
		}
		pause := backoff
		if wait > 0 {
			left := wait - time.Since(since)
			if left <= 0 {
				return fmt.Errorf("the runtime at %s has not answered for %v: %w", g.endpoint, wait, err)
			}
			pause = min(pause, left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
