// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"testing"

	"github.com/plegkit/pleg"
)

// FuzzDecode feeds the decoder arbitrary segments: it must return records
// or an error, never panic, and a record it returns must encode back to
// the bytes it came from.
func FuzzDecode(f *testing.F) {
	ev := event(1)
	ev.AfterRestart, ev.Sandbox = true, true
	seg := appendCheckpoint(header(), &checkpoint{origin: 5, next: 7, reserved: 9, pods: []pleg.PodReport{report("p", "a", "b")}})
	seg = appendOpen(seg, "boot", testNow)
	seg = appendReserve(seg, 100)
	seg = appendBatch(seg, 7, []pleg.Event{ev, event(2), detailed(1), detailed(2)}, []pleg.PodReport{report("p", "a"), {UID: "q"}})
	seg = appendGap(seg, 9, 12)
	seg = appendClose(seg)
	f.Add(seg)
	f.Add(seg[:len(seg)-5])
	f.Add(header())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newest := range []bool{false, true} {
			rs := newRecovered(16, 1<<20)
			_ = rs.replay("fuzz.seg", data, newest)
		}
		if len(data) < headerSize {
			return
		}
		for off := headerSize; off < len(data); {
			payload, n, err := nextRecord(data[off:])
			if err != nil {
				return
			}
			r, err := decodeRecord(payload, formatVersion, map[string]string{})
			if err != nil {
				return
			}
			if again := encode(r); string(again) != string(data[off:off+n]) {
				t.Fatalf("record type %d at %d does not encode back:\n got  %x\n want %x", r.typ, off, again, data[off:off+n])
			}
			off += n
		}
	})
}

// encode is the inverse of decodeRecord, for the fuzzer.
func encode(r record) []byte {
	switch r.typ {
	case recOpen:
		return appendOpen(nil, r.boot, r.at)
	case recReserve:
		return appendReserve(nil, r.upTo)
	case recBatch:
		return appendBatch(nil, r.batch.first, r.batch.events, r.batch.pods)
	case recGap:
		return appendGap(nil, r.from, r.to)
	case recCheckpoint:
		return appendCheckpoint(nil, &r.checkpoint)
	default:
		return appendClose(nil)
	}
}
