// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/plegkit/pleg"
)

// The records: what a record's body holds, by type and format version.
// encoding.go frames them and spells their integers, strings and times.
//
// From format version 3 an event ends with what the container's status
// said: its image (a string), a byte whose bit 1 tells an attempt follows
// and bit 2 an exit code, the attempt (uvarint) and the exit code
// (varint) where told, then the reason and the message (strings). A
// version-2 event ends after its times; it decodes with those fields
// empty. A segment holds one version: every run starts a new one.
//
// From format version 4 an event starts with its type as a byte (1 to 5:
// ContainerStarted, ContainerDied, ContainerRemoved, PodSync,
// ConditionMet) and its flags; its pod's UID, name and namespace follow
// unless a flag tells they are the previous event's in the batch, and
// its observed time unless another tells it is the previous event's: a
// relist's events come pod by pod and share its start. Its container's
// ID and name, its start and finish times and what the status said
// follow. Before, an event was its type, its pod and container as
// strings, its flags and its three times, then (from version 3) the
// status's details.
//
// A checkpoint ends, from format version 2, with the runtime the store
// describes: its endpoint, name and version (three strings, empty where
// unknown). A version-1 checkpoint ends after its pods; its store names no
// runtime.

// The record types.
const (
	// recOpen starts a run: the boot it runs in and when it started.
	recOpen byte = 1 + iota
	// recReserve raises the highest sequence number that may be given out
	// before another reservation; it is written and synced ahead of use.
	recReserve
	// recBatch is a commit: numbered events and the reports of the pods
	// they changed.
	recBatch
	// recGap records sequence numbers whose events were lost.
	recGap
	// recCheckpoint starts every segment: all that a reader needs to go on
	// from there, so that older segments can be deleted.
	recCheckpoint
	// recClose ends a run that stopped cleanly, with everything synced.
	recClose
)

const (
	flagSandbox      = 1
	flagAfterRestart = 2
	// From format version 4: the event's pod, or its observed time, is
	// the previous event's in the batch.
	flagSamePod      = 4
	flagSameObserved = 8
)

// What a version-3 event's presence byte tells follows.
const (
	hasAttempt  = 1
	hasExitCode = 2
)

// eventTypes are the event types a version-4 event names by their index
// plus one.
var eventTypes = []pleg.EventType{
	pleg.ContainerStarted, pleg.ContainerDied, pleg.ContainerRemoved, pleg.PodSync, pleg.ConditionMet,
}

// codeRemoved is ContainerRemoved's type byte.
const codeRemoved = 3

// eventCode is t's type byte, 0 for none: a relist encodes thousands.
func eventCode(t pleg.EventType) byte {
	switch t {
	case pleg.ContainerStarted:
		return 1
	case pleg.ContainerDied:
		return 2
	case pleg.ContainerRemoved:
		return codeRemoved
	case pleg.PodSync:
		return 4
	case pleg.ConditionMet:
		return 5
	}
	return 0
}

// appendEvent appends ev, which follows prev in its batch (nil for the
// first).
func appendEvent(b []byte, ev, prev *pleg.Event) []byte {
	code := eventCode(ev.Type)
	var flags byte
	if ev.Sandbox {
		flags |= flagSandbox
	}
	if ev.AfterRestart {
		flags |= flagAfterRestart
	}
	samePod := prev != nil &&
		prev.PodUID == ev.PodUID && prev.PodName == ev.PodName && prev.PodNamespace == ev.PodNamespace
	if samePod {
		flags |= flagSamePod
	}
	sameObserved := prev != nil && prev.Observed.Equal(ev.Observed)
	if sameObserved {
		flags |= flagSameObserved
	}
	b = append(b, code, flags)
	if !samePod {
		b = appendString(b, ev.PodUID)
		b = appendString(b, ev.PodName)
		b = appendString(b, ev.PodNamespace)
	}
	b = appendString(b, ev.ContainerID)
	b = appendString(b, ev.ContainerName)
	if !sameObserved {
		b = appendTime(b, ev.Observed)
	}
	b = appendTime(b, ev.StartedAt)
	b = appendTime(b, ev.FinishedAt)
	return appendDetails(b, ev)
}

// appendDetails appends what the container's status said of ev.
func appendDetails(b []byte, ev *pleg.Event) []byte {
	b = appendString(b, ev.Image)
	var has byte
	if ev.Attempt != nil {
		has |= hasAttempt
	}
	if ev.ExitCode != nil {
		has |= hasExitCode
	}
	b = append(b, has)
	if ev.Attempt != nil {
		b = binary.AppendUvarint(b, uint64(*ev.Attempt))
	}
	if ev.ExitCode != nil {
		b = binary.AppendVarint(b, int64(*ev.ExitCode))
	}
	b = appendString(b, ev.Reason)
	return appendString(b, ev.Message)
}

var itemStates = []pleg.ItemState{pleg.ItemRunning, pleg.ItemExited, pleg.ItemUnknown}

func appendPods(b []byte, pods []pleg.PodReport) []byte {
	b = binary.AppendUvarint(b, uint64(len(pods)))
	for i := range pods {
		p := &pods[i]
		b = appendString(b, p.UID)
		b = appendString(b, p.Name)
		b = appendString(b, p.Namespace)
		b = binary.AppendUvarint(b, uint64(len(p.Items)))
		for _, it := range p.Items {
			b = appendString(b, it.ID)
			b = appendString(b, it.Name)
			var flags byte
			if it.Sandbox {
				flags |= flagSandbox
			}
			b = append(b, flags)
			state := byte(0)
			for i, s := range itemStates {
				if s == it.State {
					state = byte(i + 1)
				}
			}
			b = append(b, state)
		}
	}
	return b
}

// batch is a decoded recBatch.
type batch struct {
	first  uint64
	events []pleg.Event
	pods   []pleg.PodReport
}

// appendBatch appends a batch record of events, numbered from first, and
// the pods' reports.
func appendBatch(buf []byte, first uint64, events []pleg.Event, pods []pleg.PodReport) []byte {
	var e encoded
	return appendBatchEncoding(buf, first, events, pods, &e)
}

// appendBatchEncoding is appendBatch keeping in e where the events are.
func appendBatchEncoding(buf []byte, first uint64, events []pleg.Event, pods []pleg.PodReport, e *encoded) []byte {
	return frame(buf, recBatch, func(b []byte) []byte {
		b = binary.AppendUvarint(b, first)
		b = binary.AppendUvarint(b, uint64(len(events)))
		b = e.appendTo(b, events)
		return appendPods(b, pods)
	})
}

// encoded is a commit's events as a batch record holds them, encoded once
// for the segment and the ring: where each ends, and where the event that
// names its pod starts, itself or the first of a run of the same pod's.
type encoded struct {
	b       []byte // the events
	ends    []int
	anchors []int
	// own is what encode encodes in; appendTo encodes in its caller's.
	own []byte
}

// encode encodes events in e's own buffer.
func (e *encoded) encode(events []pleg.Event) {
	if cap(e.own) > maxKeptBuffer {
		e.own, e.ends, e.anchors = nil, nil, nil
	}
	e.own = e.appendTo(e.own[:0], events)
}

// appendTo appends events to b, encoded, and keeps where they are.
func (e *encoded) appendTo(b []byte, events []pleg.Event) []byte {
	if cap(e.ends) > maxKeptBuffer/8 {
		e.ends, e.anchors = nil, nil
	}
	e.ends, e.anchors = e.ends[:0], e.anchors[:0]
	base := len(b)
	var prev *pleg.Event
	anchor := 0
	for i := range events {
		start := len(b)
		b = appendEvent(b, &events[i], prev)
		if b[start+1]&flagSamePod == 0 {
			anchor = start - base
		}
		e.ends = append(e.ends, len(b)-base)
		e.anchors = append(e.anchors, anchor)
		prev = &events[i]
	}
	// What b holds now stays put: appending to b may move it, not this.
	e.b = b[base:len(b):len(b)]
	return b
}

// checkpoint is a decoded recCheckpoint.
type checkpoint struct {
	origin, next, reserved uint64
	// created is when the store was created.
	created time.Time
	pods    []pleg.PodReport
	// runtime is the runtime the store describes; zero in a version-1
	// checkpoint.
	runtime Runtime
}

func appendCheckpoint(buf []byte, c *checkpoint) []byte {
	return frame(buf, recCheckpoint, func(b []byte) []byte {
		b = binary.AppendUvarint(b, c.origin)
		b = binary.AppendUvarint(b, c.next)
		b = binary.AppendUvarint(b, c.reserved)
		b = appendTime(b, c.created)
		b = appendPods(b, c.pods)
		b = appendString(b, c.runtime.Endpoint)
		b = appendString(b, c.runtime.Name)
		return appendString(b, c.runtime.Version)
	})
}

func appendOpen(buf []byte, boot string, at time.Time) []byte {
	return frame(buf, recOpen, func(b []byte) []byte {
		b = appendString(b, boot)
		return appendTime(b, at)
	})
}

func appendReserve(buf []byte, upTo uint64) []byte {
	return frame(buf, recReserve, func(b []byte) []byte { return binary.AppendUvarint(b, upTo) })
}

func appendGap(buf []byte, from, to uint64) []byte {
	return frame(buf, recGap, func(b []byte) []byte {
		b = binary.AppendUvarint(b, from)
		return binary.AppendUvarint(b, to)
	})
}

func appendClose(buf []byte) []byte {
	return frame(buf, recClose, func(b []byte) []byte { return b })
}

// event reads an event that follows prev in its batch (nil for the
// first).
func (d *decoder) event(prev *pleg.Event) pleg.Event {
	if d.version < 4 {
		return d.eventV3()
	}
	var ev pleg.Event
	code, flags := d.byte(), d.byte()
	if code >= 1 && int(code) <= len(eventTypes) {
		ev.Type = eventTypes[code-1]
	} else if d.err == nil {
		d.fail("unknown event type %d", code)
	}
	if flags&^(flagSandbox|flagAfterRestart|flagSamePod|flagSameObserved) != 0 {
		d.fail("unknown event flags %#x", flags)
	}
	if prev == nil && flags&(flagSamePod|flagSameObserved) != 0 {
		d.fail("the first event of a batch refers to the one before")
		return ev
	}
	ev.Sandbox, ev.AfterRestart = flags&flagSandbox != 0, flags&flagAfterRestart != 0
	if flags&flagSamePod != 0 {
		ev.PodUID, ev.PodName, ev.PodNamespace = prev.PodUID, prev.PodName, prev.PodNamespace
	} else {
		ev.PodUID, ev.PodName, ev.PodNamespace = d.string(), d.string(), d.string()
	}
	ev.ContainerID, ev.ContainerName = d.string(), d.string()
	if flags&flagSameObserved != 0 {
		ev.Observed = prev.Observed
	} else {
		ev.Observed = d.time()
	}
	ev.StartedAt, ev.FinishedAt = d.time(), d.time()
	d.details(&ev)
	return ev
}

// eventV3 reads an event of format version 3 or older.
func (d *decoder) eventV3() pleg.Event {
	ev := pleg.Event{
		Type: pleg.EventType(d.string()), PodUID: d.string(), PodName: d.string(), PodNamespace: d.string(),
		ContainerID: d.string(), ContainerName: d.string(),
	}
	flags := d.byte()
	ev.Sandbox, ev.AfterRestart = flags&flagSandbox != 0, flags&flagAfterRestart != 0
	ev.Observed, ev.StartedAt, ev.FinishedAt = d.time(), d.time(), d.time()
	if d.version >= 3 {
		d.details(&ev)
	}
	switch ev.Type {
	case pleg.ContainerStarted, pleg.ContainerDied, pleg.ContainerRemoved, pleg.PodSync, pleg.ConditionMet:
	default:
		d.fail("unknown event type %q", ev.Type)
	}
	return ev
}

// details reads what the container's status said of ev.
func (d *decoder) details(ev *pleg.Event) {
	ev.Image = d.string()
	has := d.byte()
	if has&^(hasAttempt|hasExitCode) != 0 {
		d.fail("unknown event fields %#x", has)
	}
	if has&hasAttempt != 0 {
		a := d.uvarint()
		if a > math.MaxUint32 {
			d.fail("attempt %d out of range", a)
		}
		attempt := uint32(a)
		ev.Attempt = &attempt
	}
	if has&hasExitCode != 0 {
		c := d.varint()
		if c < math.MinInt32 || c > math.MaxInt32 {
			d.fail("exit code %d out of range", c)
		}
		code := int32(c)
		ev.ExitCode = &code
	}
	ev.Reason, ev.Message = d.string(), d.string()
}

func (d *decoder) pods() []pleg.PodReport {
	n := d.count()
	pods := make([]pleg.PodReport, 0, n)
	for range n {
		p := pleg.PodReport{UID: d.string(), Name: d.string(), Namespace: d.string()}
		items := d.count()
		if items > 0 {
			p.Items = make([]pleg.ItemReport, 0, items)
		}
		for range items {
			it := pleg.ItemReport{ID: d.string(), Name: d.string()}
			it.Sandbox = d.byte()&flagSandbox != 0
			s := int(d.byte())
			if s < 1 || s > len(itemStates) {
				d.fail("unknown item state %d", s)
				return nil
			}
			it.State = itemStates[s-1]
			p.Items = append(p.Items, it)
		}
		if d.err != nil {
			return nil
		}
		if p.UID == "" {
			d.fail("a pod report without a UID")
			return nil
		}
		pods = append(pods, p)
	}
	return pods
}

// record is one decoded record; the fields its type uses are set.
type record struct {
	typ        byte
	boot       string
	at         time.Time
	upTo       uint64 // recReserve
	from, to   uint64 // recGap
	batch      batch
	checkpoint checkpoint
}

// decodeRecord decodes a record's payload, of a segment of format
// version, interning its strings in strs if set.
func decodeRecord(payload []byte, version uint16, strs map[string]string) (record, error) {
	if len(payload) == 0 {
		return record{}, errors.New("empty record")
	}
	r := record{typ: payload[0]}
	d := &decoder{b: payload[1:], strs: strs, version: version}
	switch r.typ {
	case recOpen:
		r.boot, r.at = d.string(), d.time()
	case recReserve:
		r.upTo = d.uvarint()
	case recBatch:
		r.batch.first = d.uvarint()
		n := d.count()
		r.batch.events = make([]pleg.Event, 0, n)
		for i := range n {
			var prev *pleg.Event
			if i > 0 {
				prev = &r.batch.events[i-1]
			}
			r.batch.events = append(r.batch.events, d.event(prev))
		}
		r.batch.pods = d.pods()
	case recGap:
		r.from, r.to = d.uvarint(), d.uvarint()
		if d.err == nil && r.to < r.from {
			d.fail("gap %d..%d runs backwards", r.from, r.to)
		}
	case recCheckpoint:
		r.checkpoint = checkpoint{origin: d.uvarint(), next: d.uvarint(), reserved: d.uvarint(), created: d.time()}
		r.checkpoint.pods = d.pods()
		if d.err == nil && len(d.b) > 0 {
			// Format version 2: the runtime follows the pods.
			r.checkpoint.runtime = Runtime{Endpoint: d.string(), Name: d.string(), Version: d.string()}
		}
	case recClose:
	default:
		return r, fmt.Errorf("unknown record type %d", r.typ)
	}
	if err := d.end(); err != nil {
		return r, fmt.Errorf("record type %d: %w", r.typ, err)
	}
	return r, nil
}
