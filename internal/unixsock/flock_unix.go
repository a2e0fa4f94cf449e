// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package unixsock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// noFollow makes open(2) fail on a symbolic link instead of following it.
const noFollow = syscall.O_NOFOLLOW

// isSymlinkError reports whether err is open(2)'s answer to O_NOFOLLOW
// on a symbolic link.
func isSymlinkError(err error) bool { return errors.Is(err, syscall.ELOOP) }

// flock takes an exclusive lock on f without waiting.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return fmt.Errorf("another process serves it (it holds %s)", f.Name())
		default:
			return fmt.Errorf("locking %s: %w", f.Name(), err)
		}
	}
}
