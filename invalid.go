// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"log/slog"

	"github.com/plegkit/pleg/metrics"
)

// Reasons a runtime list item is malformed, the reason label of
// pleg_invalid_runtime_items_total.
const (
	invalidNilItem         = "nil_item"
	invalidEmptyID         = "empty_id"
	invalidNilMetadata     = "nil_metadata"
	invalidUnknownState    = "unknown_state"
	invalidDuplicateID     = "duplicate_id"
	invalidNoPod           = "no_pod"
	invalidPodNameConflict = "pod_name_conflict"
)

func invalidMessage(reason string) string {
	switch reason {
	case invalidNilItem:
		return "Runtime listed an empty item; ignoring it"
	case invalidEmptyID:
		return "Runtime listed an item without an ID; ignoring it"
	case invalidNilMetadata:
		return "Runtime listed an item without metadata; ignoring a sandbox, naming a container from its labels"
	case invalidUnknownState:
		return "Runtime reported a state CRI does not define; treating it as unknown"
	case invalidDuplicateID:
		return "Runtime listed the same ID twice in one pod; keeping the first"
	case invalidNoPod:
		return "Container has no pod UID label and its sandbox is not listed; ignoring it"
	default:
		return "Runtime listed one pod UID under two names; keeping the first"
	}
}

type invalidKey struct{ reason, kind, id string }

// invalidItems reports malformed list items once each: a bad item stays in
// every list until the runtime drops it, and a warning a second would bury
// the first one. An item that leaves the list and comes back is reported
// again. Only the relist goroutine uses it.
type invalidItems struct {
	log     *slog.Logger
	metrics *metrics.PLEG
	// seen maps each reported item to the last list pass that had it.
	seen map[invalidKey]uint64
}

func newInvalidItems(log *slog.Logger, m *metrics.PLEG) *invalidItems {
	return &invalidItems{log: log, metrics: m, seen: make(map[invalidKey]uint64)}
}

// report notes a malformed item of kind "sandbox", "container" or "pod".
func (v *invalidItems) report(pass uint64, reason, kind, id string, attrs ...any) {
	k := invalidKey{reason, kind, id}
	if _, ok := v.seen[k]; !ok {
		v.metrics.InvalidItems.WithLabelValues(reason).Inc()
		v.log.Warn(invalidMessage(reason), append([]any{"reason", reason, "kind", kind, "id", id}, attrs...)...)
	}
	v.seen[k] = pass
}

// forgetBefore drops items no list has had since pass, after a full list.
func (v *invalidItems) forgetBefore(pass uint64) {
	for k, p := range v.seen {
		if p < pass {
			delete(v.seen, k)
		}
	}
}
