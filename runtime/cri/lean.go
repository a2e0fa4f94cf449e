// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
	"unique"

	"github.com/plegkit/pleg/internal/msgsize"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Lean lists.
//
// A relist reads, of each listed item, its IDs, metadata, state, creation
// time and the kubelet's io.kubernetes.* labels; the statuses it caches
// come from status calls. But protobuf decodes everything: at 30,000
// containers, the pod labels and annotations of every item cost most of
// the relist's time and memory (150 ms and 100 MB a relist on the
// simulator). The lean codec decodes list answers field by field and
// keeps only what relisting reads. Everything else is decoded as usual.

// Statuses, which the generator keeps in its cache for every pod, are
// decoded whole, then made to share the strings they repeat with every
// other status: label and annotation keys and most of their values, pod
// and container names, images and reasons. A decoded status holds its own
// copy of each, about a third of its memory: tens of megabytes at 10,000
// pods. Strings are interned with package unique, which lets go of a
// string once nothing holds it.

// leanCodec is the proto codec with lean list answers and compact
// statuses.
type leanCodec struct{ encoding.CodecV2 }

func newLeanCodec() leanCodec { return leanCodec{protoCodec()} }

func protoCodec() encoding.CodecV2 { return encoding.GetCodecV2(protocodec.Name) }

// Name implements encoding.CodecV2. It is empty on purpose. grpc-go makes
// a forced codec's name the call's content-subtype, so a codec named
// "proto" sends content-type application/grpc+proto. CRI-O serves gRPC and
// HTTP on one socket through cmux, which takes a connection for gRPC only
// when its content-type is exactly application/grpc, and drops the others:
// every list and status call would fail with Unavailable. With no name,
// the header is the plain application/grpc that every CRI server accepts,
// and the server decodes with its default codec, proto, which is what this
// codec sends.
func (leanCodec) Name() string { return "" }

// Unmarshal implements encoding.CodecV2.
func (c leanCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var err error
	switch m := v.(type) {
	case *runtimeapi.ListContainersResponse:
		m.Containers, err = decodeList(data, decodeContainer)
	case *runtimeapi.StreamContainersResponse:
		m.Containers, err = decodeList(data, decodeContainer)
	case *runtimeapi.ListPodSandboxResponse:
		m.Items, err = decodeList(data, decodeSandbox)
	case *runtimeapi.StreamPodSandboxesResponse:
		m.PodSandboxes, err = decodeList(data, decodeSandbox)
	case *runtimeapi.ContainerStatusResponse:
		if err := c.CodecV2.Unmarshal(data, v); err != nil {
			return err
		}
		compactContainer(m.GetStatus())
		return nil
	case *runtimeapi.PodSandboxStatusResponse:
		if err := c.CodecV2.Unmarshal(data, v); err != nil {
			return err
		}
		compactSandbox(m.GetStatus())
		return nil
	default:
		return c.CodecV2.Unmarshal(data, v)
	}
	if err != nil {
		return fmt.Errorf("cri: decoding a list answer: %w", err)
	}
	return nil
}

// countItems counts the items of a list answer, field 1 in every one,
// without decoding them.
func countItems(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		if num == 1 && typ == protowire.BytesType {
			n++
		}
		b = b[l:]
	}
	return n, nil
}

// countingCodec decodes the answer of one list call with codec, counting
// its messages, bytes and items into n, and refusing it past n's limits
// before decoding more.
type countingCodec struct {
	codec encoding.CodecV2
	n     *counter
}

// Name implements encoding.CodecV2; empty, as leanCodec's.
func (countingCodec) Name() string { return "" }

func (c countingCodec) Marshal(v any) (mem.BufferSlice, error) { return c.codec.Marshal(v) }

func (c countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := c.n.count(buf.ReadOnlyData()); err != nil {
		return err
	}
	return c.codec.Unmarshal(mem.BufferSlice{buf}, v)
}

// counter is what the answer of one list call brought so far, against
// the limits on it.
type counter struct {
	maxBytes, maxItems              int
	total, largest, messages, items int
	streamed                        bool
	// refused is the error that refused the answer, if one did.
	refused error
}

func (r *Runtime) newCounter() *counter {
	return &counter{maxBytes: r.opts.MaxListBytes, maxItems: r.opts.MaxListItems}
}

// listCodec is the codec of a list call counting into n: lean, or whole
// with Options.FullLists.
func (r *Runtime) listCodec(n *counter) grpc.CallOption {
	codec := encoding.CodecV2(newLeanCodec())
	if r.opts.FullLists {
		codec = protoCodec()
	}
	return grpc.ForceCodecV2(countingCodec{codec: codec, n: n})
}

// count adds a message of a list's answer, or refuses it.
func (n *counter) count(b []byte) error {
	n.messages++
	n.total += len(b)
	n.largest = max(n.largest, len(b))
	items, err := countItems(b)
	if err != nil {
		return fmt.Errorf("cri: decoding a list answer: %w", err)
	}
	n.items += items
	switch {
	case n.total > n.maxBytes:
		n.refused = status.Errorf(codes.ResourceExhausted, "cri: the list answer passed %d bytes, the %s a list's answer "+
			"may have in all (MaxListBytes), "+
			"after %d messages and %d items%s", n.maxBytes, msgsize.MiB(n.maxBytes, -1), n.messages, n.items, whatToDo)
	case n.items > n.maxItems:
		n.refused = status.Errorf(
			codes.ResourceExhausted,
			"cri: the list answer passed %d items (MaxListItems), with %d bytes in %d messages",
			n.maxItems,
			n.total,
			n.messages,
		)
	}
	return n.refused
}

// decodeList decodes the items of a list answer, field 1 in every one.
func decodeList[T any](data mem.BufferSlice, decode func([]byte, *T) error) ([]*T, error) {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()

	// Count first, so the items live in one allocation.
	n, err := countItems(b)
	if err != nil {
		return nil, err
	}
	items := make([]T, n)
	out := make([]*T, 0, n)
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		b = b[l:]
		if num != 1 || typ != protowire.BytesType {
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
			continue
		}
		v, l := protowire.ConsumeBytes(b)
		b = b[l:]
		item := &items[len(out)]
		if err := decode(v, item); err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// fields walks the fields of a message, calling f with each field's number,
// type and value bytes (for varints, the value is in x).
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, l = protowire.ConsumeVarint(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

var errUTF8 = errors.New("string field contains invalid UTF-8")

func str(v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", errUTF8
	}
	return string(v), nil
}

// decodeContainer keeps of a runtime.v1.Container its id (1), sandbox id
// (2), metadata (3: name 1, attempt 2), state (6), created_at (7) and
// io.kubernetes.* labels (8).
func decodeContainer(b []byte, c *runtimeapi.Container) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) (err error) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			c.Id, err = str(v)
		case num == 2 && typ == protowire.BytesType:
			c.PodSandboxId, err = str(v)
		case num == 3 && typ == protowire.BytesType:
			// A message field repeated on the wire merges, as protobuf
			// decodes it.
			if c.Metadata == nil {
				c.Metadata = &runtimeapi.ContainerMetadata{}
			}
			err = fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) (err error) {
				switch {
				case num == 1 && typ == protowire.BytesType:
					c.Metadata.Name, err = str(v)
				case num == 2 && typ == protowire.VarintType:
					c.Metadata.Attempt = uint32(x)
				}
				return err
			})
		case num == 6 && typ == protowire.VarintType:
			c.State = runtimeapi.ContainerState(int32(x))
		case num == 7 && typ == protowire.VarintType:
			c.CreatedAt = int64(x)
		case num == 8 && typ == protowire.BytesType:
			err = kubeletLabel(v, &c.Labels)
		}
		return err
	})
}

// decodeSandbox keeps of a runtime.v1.PodSandbox its id (1), metadata (2:
// name 1, uid 2, namespace 3, attempt 4), state (3) and created_at (4).
func decodeSandbox(b []byte, s *runtimeapi.PodSandbox) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) (err error) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			s.Id, err = str(v)
		case num == 2 && typ == protowire.BytesType:
			if s.Metadata == nil {
				s.Metadata = &runtimeapi.PodSandboxMetadata{}
			}
			err = fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) (err error) {
				switch {
				case num == 1 && typ == protowire.BytesType:
					s.Metadata.Name, err = str(v)
				case num == 2 && typ == protowire.BytesType:
					s.Metadata.Uid, err = str(v)
				case num == 3 && typ == protowire.BytesType:
					s.Metadata.Namespace, err = str(v)
				case num == 4 && typ == protowire.VarintType:
					s.Metadata.Attempt = uint32(x)
				}
				return err
			})
		case num == 3 && typ == protowire.VarintType:
			s.State = runtimeapi.PodSandboxState(int32(x))
		case num == 4 && typ == protowire.VarintType:
			s.CreatedAt = int64(x)
		}
		return err
	})
}

// kubeletLabel adds a map entry (key 1, value 2) to labels if its key is
// one of the kubelet's.
func kubeletLabel(entry []byte, labels *map[string]string) error {
	var key, value []byte
	if err := fields(entry, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			key = v
		case num == 2 && typ == protowire.BytesType:
			value = v
		}
		return nil
	}); err != nil {
		return err
	}
	if !bytes.HasPrefix(key, []byte("io.kubernetes.")) {
		return nil
	}
	if !utf8.Valid(key) || !utf8.Valid(value) {
		return errUTF8
	}
	if *labels == nil {
		*labels = make(map[string]string, 4)
	}
	(*labels)[kubeletKey(key)] = string(value)
	return nil
}

// kubeletKey returns the key as a constant when it is one of the labels
// every container carries, so that 30,000 containers share four key
// strings instead of holding 120,000.
func kubeletKey(key []byte) string {
	switch string(key) {
	case "io.kubernetes.pod.uid":
		return "io.kubernetes.pod.uid"
	case "io.kubernetes.pod.name":
		return "io.kubernetes.pod.name"
	case "io.kubernetes.pod.namespace":
		return "io.kubernetes.pod.namespace"
	case "io.kubernetes.container.name":
		return "io.kubernetes.container.name"
	}
	return string(key)
}

// compactContainer interns the repeated strings of a freshly decoded
// status, which nothing else holds yet.
func compactContainer(c *runtimeapi.ContainerStatus) {
	if c == nil {
		return
	}
	c.Labels, c.Annotations = internMap(c.Labels), internMap(c.Annotations)
	if md := c.Metadata; md != nil {
		md.Name = intern(md.Name)
	}
	if img := c.Image; img != nil {
		img.Image = intern(img.Image)
	}
	c.ImageRef, c.ImageId, c.Reason = intern(c.ImageRef), intern(c.ImageId), intern(c.Reason)
}

func compactSandbox(s *runtimeapi.PodSandboxStatus) {
	if s == nil {
		return
	}
	s.Labels, s.Annotations = internMap(s.Labels), internMap(s.Annotations)
	if md := s.Metadata; md != nil {
		md.Name, md.Namespace, md.Uid = intern(md.Name), intern(md.Namespace), intern(md.Uid)
	}
	s.RuntimeHandler = intern(s.RuntimeHandler)
}

func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}
