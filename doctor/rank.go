// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"cmp"
	"slices"
)

// causeOrder ranks the findings that name a cause (kubelet-pleg-behind
// is one only where it says the kubelet itself is at fault, and is then
// marked so), the most specific and
// the furthest down first: a process stopped before a mount that hangs,
// a mount before the starved resources, and the resources the whole node
// lacks (its CPU) last, as they are as often a symptom of the node's
// trouble as its cause. A cause, found, outranks every symptom, whatever
// the two's severities: the first finding names what to act on.
var causeOrder = []string{
	"runtime-stopped",
	"runtime-not-running",
	"shim-stopped",
	"kubelet-stopped",
	"mount-hung",
	"pids-exhausted",
	"cni-plugin-hung",
	"memory-starved",
	"disk-saturated",
	"runtime-cpu-starved",
	"oci-stuck",
	"dead-containers",
	"kubelet-starved",
	"kubelet-stuck",
	"cpu-starved",
	"pod-pids-limit",
	"shim-lingering",
}

// stuckOrder ranks the findings of something stuck whose cause was not
// named: after the causes, before the symptoms seen through the CRI.
var stuckOrder = []string{
	"process-in-d",
	"processes-in-d",
	"runtime-lock-contention",
	"kernel-log",
	"process-zombie",
}

// rankFindings orders findings for the reader: first the causes that
// explain something (a finding marked cause, warning or worse), by
// causeOrder, so that a hung mount outranks the runc in D that waits on
// it, which outranks "runtime unreachable"; then the rest by severity,
// the stuck before the symptoms, and in the order found.
func rankFindings(fs []Finding) {
	class := func(f Finding) (int, int) {
		if i := slices.Index(causeOrder, f.ID); i >= 0 {
			return 0, i
		}
		if i := slices.Index(stuckOrder, f.ID); i >= 0 {
			return 1, i
		}
		return 2, 0
	}
	first := func(f Finding) int {
		if f.cause && f.Severity != Info {
			return -1
		}
		return f.Severity.rank()
	}
	slices.SortStableFunc(fs, func(x, y Finding) int {
		cx, ix := class(x)
		cy, iy := class(y)
		return cmp.Or(cmp.Compare(first(x), first(y)), cmp.Compare(cx, cy), cmp.Compare(ix, iy))
	})
}
