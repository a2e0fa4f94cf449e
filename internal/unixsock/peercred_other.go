// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package unixsock

import "net"

// PeerUID tells nothing where SO_PEERCRED does not exist: every client of
// a socket is then one.
func PeerUID(net.Conn) (uid uint32, ok bool) { return 0, false }
