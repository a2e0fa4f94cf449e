// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"context"
	"fmt"
	"time"
)

// WaitFor polls cond every half second until it holds or ctx ends, and
// then says what was awaited and cond's last error: a deadline on ctx
// bounds the progress a test waits for, it claims no speed.
func WaitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
			}
			return fmt.Errorf("waiting for %s: %w (last: %w)", what, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
