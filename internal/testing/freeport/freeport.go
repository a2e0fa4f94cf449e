// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package freeport picks loopback ports for the servers the harnesses
// start, below the kernel's ephemeral range. A server stopped for an
// outage and started again takes its port back; a port of the ephemeral
// range freed meanwhile may become any outgoing connection's source port
// on a busy machine, and the restart would fail to bind. Below the range
// only a listener that asks for that very port can take it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port picked: above the well-known and most
// registered ports.
const lowest = 10000

// Pick returns n distinct ports of 127.0.0.1, each free at the moment.
func Pick(n int) ([]int, error) {
	high := ephemeralLow()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("freeport: no %d free ports between %d and %d", n, lowest, high)
		}
		port := lowest + rand.IntN(max(high-lowest, 1))
		if contains(ports, port) {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken
		}
		_ = l.Close() // only a check: the caller's server binds it
		ports = append(ports, port)
	}
	return ports, nil
}

func contains(ports []int, p int) bool {
	for _, q := range ports {
		if q == p {
			return true
		}
	}
	return false
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= lowest {
		return 32768
	}
	return low
}
