// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package msgsize holds what pleg says of a CRI list's size against a
// message limit, in one place for its three speakers: the CRI client's
// errors (runtime, runtime/cri), the diagnosis (doctor) and the reports
// to the cluster (kubereport). doctor and kubereport import it rather
// than each other, so that neither reads the other's conclusions.
package msgsize

import (
	"fmt"
	"strconv"
)

// KubeletMax is the largest CRI message the kubelet's client accepts,
// which cannot be configured: a whole-node list answered in one message
// past it fails every kubelet relist.
const KubeletMax = 16 << 20

// Near is the share of a message limit from which a list is near it.
const Near = 0.75

// Bytes spells a size in binary units: bytes, KiB to one decimal, MiB to
// two.
func Bytes(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}

// MiB spells a size in MiB with decimals digits after the point, or, with
// -1, as few as say it exactly (a limit: "16 MiB").
func MiB(n, decimals int) string {
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', decimals, 64) + " MiB"
}
