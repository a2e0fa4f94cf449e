// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package simtest starts simulated CRI runtimes for tests, as httptest
// starts HTTP servers.
package simtest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/plegkit/pleg/sim"
)

// Start serves a simulator with opts on a socket of its own, quiet unless
// opts.Logger says otherwise, and stops it when the test ends. The socket
// is under the system's temporary directory rather than t.TempDir(), whose
// paths can pass the 108 bytes a unix socket path may have.
func Start(t testing.TB, opts sim.Options) *sim.Sim {
	t.Helper()
	dir, err := os.MkdirTemp("", "sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts.Socket = filepath.Join(dir, "cri.sock")
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := sim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}
