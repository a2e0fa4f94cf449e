// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/plegkit/pleg"
)

// The on-disk format.
//
// A segment file starts with a header: the magic "PLEGJRNL", the format
// version (uint16, little endian), two zero bytes and the CRC-32C of those
// 12 bytes. Records follow, each framed as its payload's length (uint32),
// the payload's CRC-32C (uint32), then the payload: a record type byte and
// its body. Integers in bodies are varints; strings are a length and bytes;
// times are nanoseconds since the epoch, 0 for none.
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
//
// A reader trusts a record only whole and matching its checksum: a record
// cut short at the end of the newest segment is a write the process did
// not finish (it was killed) and is dropped; anything else that does not
// decode is damage.

const (
	magic = "PLEGJRNL"
	// formatVersion is the version this code writes; it reads it and
	// every older one. A segment of a higher version was written by a
	// newer pleg. 2 added the runtime to checkpoints, 3 the container's
	// image, attempt and exit to events, 4 wrote an event's type as a
	// byte and its pod and observed time once for a run of events.
	formatVersion = 4
	headerSize    = 16
	frameSize     = 8
	// maxRecord bounds a record's payload: a checkpoint of 10,000 pods is
	// a few megabytes.
	maxRecord = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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

func header() []byte {
	h := make([]byte, headerSize)
	copy(h, magic)
	binary.LittleEndian.PutUint16(h[8:], formatVersion)
	binary.LittleEndian.PutUint32(h[12:], crc32.Checksum(h[:12], castagnoli))
	return h
}

// errNewer is the error of a segment written by a newer version.
var errNewer = errors.New("written by a newer version of pleg")

// checkHeader checks a segment's header and returns its format version.
func checkHeader(h []byte) (version uint16, err error) {
	if len(h) < headerSize {
		return 0, fmt.Errorf("header cut short at %d bytes", len(h))
	}
	if string(h[:8]) != magic {
		return 0, errors.New("not a pleg journal segment (bad magic)")
	}
	if crc32.Checksum(h[:12], castagnoli) != binary.LittleEndian.Uint32(h[12:]) {
		return 0, errors.New("header checksum mismatch")
	}
	version = binary.LittleEndian.Uint16(h[8:])
	if version > formatVersion {
		return 0, fmt.Errorf("format version %d, this pleg reads %d: %w", version, formatVersion, errNewer)
	}
	return version, nil
}

// frame appends to buf the frame of a record whose payload is built by
// body, and returns it.
func frame(buf []byte, typ byte, body func([]byte) []byte) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, frameSize)...)
	buf = append(buf, typ)
	buf = body(buf)
	payload := buf[start+frameSize:]
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	return buf
}

// errShort tells that the data ends inside a record. errEnd and
// errUnfinished are its kinds in a mapped tail: only zeros follow the
// records, or a record copied but for its length.
var (
	errShort      = errors.New("record cut short")
	errEnd        = fmt.Errorf("%w: the zeros of a tail never written", errShort)
	errUnfinished = fmt.Errorf("%w: a record copied without its length", errShort)
)

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// nextRecord splits the first record off data: its payload, and the bytes
// it took. errShort tells that data ends before the record does.
func nextRecord(data []byte) (payload []byte, n int, err error) {
	if len(data) < frameSize {
		return nil, 0, errShort
	}
	size := binary.LittleEndian.Uint32(data)
	sum := binary.LittleEndian.Uint32(data[4:])
	if size == 0 {
		// No record starts with a zero length: a segment's mapped tail
		// (tail.go) holds zeros past what was written, and a copy whose
		// length was not yet stored when its process was killed.
		if allZero(data) {
			return nil, 0, errEnd
		}
		return nil, 0, errUnfinished
	}
	if size > maxRecord {
		return nil, 0, fmt.Errorf("record length %d out of range", size)
	}
	if uint64(len(data)-frameSize) < uint64(size) {
		return nil, 0, errShort
	}
	payload = data[frameSize : frameSize+int(size)]
	if crc32.Checksum(payload, castagnoli) != sum {
		return nil, 0, errors.New("record checksum mismatch")
	}
	return payload, frameSize + int(size), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return binary.AppendVarint(b, 0)
	}
	return binary.AppendVarint(b, t.UnixNano())
}

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

// decoder reads a record body; the first error sticks and every later read
// returns zero values.
type decoder struct {
	b   []byte
	err error
	// strs, if set, interns the strings read: a store names the same
	// pods, namespaces and types over and over.
	strs map[string]string
	// version is the format version of the segment read.
	version uint16
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a number of items that each take at least one byte.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("record ends early")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string of %d bytes exceeds the %d left", n, len(d.b))
		return ""
	}
	b := d.b[:n]
	d.b = d.b[n:]
	if d.strs == nil {
		return string(b)
	}
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	d.strs[s] = s
	return s
}

func (d *decoder) time() time.Time {
	ns := d.varint()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// end fails unless the body was read whole.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes left over", len(d.b))
	}
	return d.err
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
