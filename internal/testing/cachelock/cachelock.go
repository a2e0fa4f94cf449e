// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cachelock serialises the test harnesses' builds and installs
// into the shared cache (~/.cache/pleg): runtimes, Prometheus,
// kube-apiserver. Several test binaries run at once under go test ./...,
// and each must wait for another that is building what it needs.
package cachelock

import (
	"fmt"
	"os"
	"syscall"
)

// Acquire takes an exclusive lock on the file at path, creating it and
// waiting for whoever holds it, and returns what releases it. The lock is
// the process's: it also ends when the process does, so a killed build
// never leaves the cache locked.
func Acquire(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close() // the lock failed: that error is the one to tell
		return nil, fmt.Errorf("cache lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock; nothing was written
}
