// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// The on-disk format: segments, frames and the primitives of a record's
// body. What the records hold is records.go's.
//
// A segment file starts with a header: the magic "PLEGJRNL", the format
// version (uint16, little endian), two zero bytes and the CRC-32C of those
// 12 bytes. Records follow, each framed as its payload's length (uint32),
// the payload's CRC-32C (uint32), then the payload: a record type byte and
// its body. Integers in bodies are varints; strings are a length and bytes;
// times are nanoseconds since the epoch, 0 for none.
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
