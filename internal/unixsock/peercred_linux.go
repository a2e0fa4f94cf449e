// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package unixsock

import (
	"net"
	"syscall"
)

// PeerUID returns the user ID of the process at the other end of c, as
// the kernel recorded it when that process connected (SO_PEERCRED): it
// cannot be forged by the peer. ok is false when c is no unix socket
// connection or the kernel does not tell.
func PeerUID(c net.Conn) (uid uint32, ok bool) {
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, false
	}
	return cred.Uid, true
}
