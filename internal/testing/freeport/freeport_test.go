// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPick(t *testing.T) {
	ports, err := Pick(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lowest || p >= ephemeralLow() || seen[p] {
			t.Errorf("port %d: want distinct ports in [%d, %d)", p, lowest, ephemeralLow())
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}
