// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package unixsock

import "os"

// noFollow is not a flag where open(2) has no O_NOFOLLOW.
const noFollow = 0

func isSymlinkError(error) bool { return false }

// flock does nothing where flock(2) does not exist: there the dial before
// replacing a socket file is the only guard.
func flock(*os.File) error { return nil }
