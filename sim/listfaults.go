// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"strings"

	"google.golang.org/protobuf/proto"
)

// The list faults (Faults.Malformed and Faults.OversizeLists) rewrite an
// answer after the store built it, and the streamed lists split it into
// messages that the oversize fault must not push past gRPC's limit.

// corruption is what corruptList does to one item.
type corruption uint8

const (
	corruptNilMetadata corruption = iota
	corruptUnknownState
	corruptPad
)

// corruptList applies the Malformed and OversizeLists faults to a list
// answer, which is then encoded afresh. It never modifies the shared items
// or slice: corrupted items are copies in a new slice.
func corruptList[T proto.Message](l wireList[T], f *activeFaults, alter func(T, corruption, string)) wireList[T] {
	m := f.Malformed
	items := l.items
	if m.IsZero() && !f.OversizeLists || len(items) == 0 {
		return l
	}
	out := make([]T, len(items), len(items)+m.DuplicateIDs)
	copy(out, items)
	corrupt := func(i int, how corruption, pad string) {
		x := proto.Clone(out[i]).(T)
		alter(x, how, pad)
		out[i] = x
	}
	i := 0
	for k := 0; k < m.NilMetadata && i < len(items); k, i = k+1, i+1 {
		corrupt(i, corruptNilMetadata, "")
	}
	for k := 0; k < m.UnknownState && i < len(items); k, i = k+1, i+1 {
		corrupt(i, corruptUnknownState, "")
	}
	for k := 0; k < m.DuplicateIDs && i < len(items); k, i = k+1, i+1 {
		out = append(out, out[i])
	}
	if f.OversizeLists {
		// One string shared by every item: the answer is large on the wire,
		// not in the simulator's memory.
		pad := strings.Repeat("x", oversizeTarget/len(out)+1)
		for i := range out {
			corrupt(i, corruptPad, pad)
		}
	}
	return wireList[T]{items: out}
}

// PaddingAnnotation is the annotation the OversizeLists fault adds.
const PaddingAnnotation = "sim.plegkit.io/padding"

func padded(annotations map[string]string, pad string) map[string]string {
	if annotations == nil {
		annotations = make(map[string]string, 1)
	}
	annotations[PaddingAnnotation] = pad
	return annotations
}

// streamBatch is how many items a streamed list message holds: large
// enough to amortize each message, small enough that encoding one message
// overlaps with the client decoding the previous.
const streamBatch = 1000

// sendBatches sends n items in messages of streamBatch items, fewer when
// they are padded, so that no message passes streamBatchBytes unless a
// single item does: send(i, j) sends items i to j-1.
func sendBatches(n int, oversize bool, send func(i, j int) error) error {
	size := streamBatch
	if oversize && n > 0 {
		perItem := oversizeTarget/n + 1024
		size = max(1, min(streamBatch, streamBatchBytes/perItem))
	}
	for i := 0; i < n; i += size {
		if err := send(i, min(i+size, n)); err != nil {
			return err
		}
	}
	return nil
}
