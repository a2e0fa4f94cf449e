// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Lists are answered from encodings made once per item.
//
// Encoding a list of 30,000 containers with their kubelet labels and
// annotations costs protobuf about 120 ms of CPU, every relist. But items
// are immutable here, so each is encoded once, when it is made, and the
// full list's wire form is kept with the ready list: a list answer is then
// a slice of bytes already made, and a streamed batch a sub-slice of it,
// since a repeated field's encoding is the concatenation of its items'.
// The bytes on the wire are what proto.Marshal would write.

// rawMessage is a message already encoded; the server's codec writes it
// as it is.
type rawMessage []byte

// wireCodec is the proto codec, passing rawMessage through.
type wireCodec struct{ encoding.CodecV2 }

func newWireCodec() wireCodec { return wireCodec{encoding.GetCodecV2(protocodec.Name)} }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if raw, ok := v.(rawMessage); ok {
		// SliceBuffer's Free does nothing: the shared bytes are only read.
		return mem.BufferSlice{mem.SliceBuffer(raw)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// listField is the field number of the items of every list answer:
// ListContainersResponse.containers, ListPodSandboxResponse.items and
// their streamed counterparts.
const listField protowire.Number = 1

// encodeItem returns an item's encoding as an element of a list answer:
// its tag and length, then the item.
func encodeItem(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic("sim: encoding a list item: " + err.Error()) // only invalid UTF-8 fails, and we never store any
	}
	out := make([]byte, 0, len(b)+1+protowire.SizeVarint(uint64(len(b))))
	out = protowire.AppendTag(out, listField, protowire.BytesType)
	out = protowire.AppendBytes(out, b)
	return out
}

// wireList is a list answer's items and, unless faults altered them,
// their encoding: off[i] is where item i starts in wire, off[len] its end.
type wireList[T any] struct {
	items []T
	wire  []byte
	off   []int
}

func buildWire[T any](items []T, encs [][]byte) wireList[T] {
	l := wireList[T]{items: items, off: make([]int, len(items)+1)}
	n := 0
	for i, e := range encs {
		l.off[i] = n
		n += len(e)
	}
	l.off[len(items)] = n
	l.wire = make([]byte, 0, n)
	for _, e := range encs {
		l.wire = append(l.wire, e...)
	}
	return l
}

// answer returns the unary answer: the encoding when there is one, else
// the message wrap builds.
func (l wireList[T]) answer(wrap func([]T) any) any {
	if l.wire != nil || len(l.items) == 0 {
		return rawMessage(l.wire)
	}
	return wrap(l.items)
}

// stream sends the list in batches, each a slice of the encoding when
// there is one.
func (l wireList[T]) stream(stream grpc.ServerStream, oversize bool, wrap func([]T) any) error {
	return sendBatches(len(l.items), oversize, func(i, j int) error {
		if l.wire != nil {
			return stream.SendMsg(rawMessage(l.wire[l.off[i]:l.off[j]]))
		}
		return stream.SendMsg(wrap(l.items[i:j]))
	})
}

// runtimeServiceDesc is the RuntimeService with the list RPCs answered
// from encodings; the other methods are the generated ones.
func runtimeServiceDesc() *grpc.ServiceDesc {
	desc := runtimeapi.RuntimeService_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	desc.Streams = append([]grpc.StreamDesc(nil), desc.Streams...)
	for i := range desc.Methods {
		switch desc.Methods[i].MethodName {
		case "ListContainers":
			desc.Methods[i].Handler = listContainersHandler
		case "ListPodSandbox":
			desc.Methods[i].Handler = listPodSandboxHandler
		}
	}
	for i := range desc.Streams {
		switch desc.Streams[i].StreamName {
		case "StreamContainers":
			desc.Streams[i].Handler = streamContainersHandler
		case "StreamPodSandboxes":
			desc.Streams[i].Handler = streamPodSandboxesHandler
		}
	}
	return &desc
}

func wrapContainers(items []*runtimeapi.Container) any {
	return &runtimeapi.ListContainersResponse{Containers: items}
}

func wrapStreamedContainers(items []*runtimeapi.Container) any {
	return &runtimeapi.StreamContainersResponse{Containers: items}
}

func wrapSandboxes(items []*runtimeapi.PodSandbox) any {
	return &runtimeapi.ListPodSandboxResponse{Items: items}
}

func wrapStreamedSandboxes(items []*runtimeapi.PodSandbox) any {
	return &runtimeapi.StreamPodSandboxesResponse{PodSandboxes: items}
}

// The handlers below have the shape of the generated ones, without
// interceptors, which the simulator does not install.

func listContainersHandler(
	srv any,
	ctx context.Context,
	dec func(any) error,
	_ grpc.UnaryServerInterceptor,
) (any, error) {
	in := new(runtimeapi.ListContainersRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	l, _, err := srv.(*runtimeServer).s.listContainers(ctx, in.GetFilter())
	if err != nil {
		return nil, err
	}
	return l.answer(wrapContainers), nil
}

func streamContainersHandler(srv any, stream grpc.ServerStream) error {
	in := new(runtimeapi.StreamContainersRequest)
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	l, f, err := srv.(*runtimeServer).s.listContainers(stream.Context(), in.GetFilter())
	if err != nil {
		return err
	}
	return l.stream(stream, f.OversizeLists, wrapStreamedContainers)
}

func listPodSandboxHandler(
	srv any,
	ctx context.Context,
	dec func(any) error,
	_ grpc.UnaryServerInterceptor,
) (any, error) {
	in := new(runtimeapi.ListPodSandboxRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	l, _, err := srv.(*runtimeServer).s.listSandboxes(ctx, in.GetFilter())
	if err != nil {
		return nil, err
	}
	return l.answer(wrapSandboxes), nil
}

func streamPodSandboxesHandler(srv any, stream grpc.ServerStream) error {
	in := new(runtimeapi.StreamPodSandboxesRequest)
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	l, f, err := srv.(*runtimeServer).s.listSandboxes(stream.Context(), in.GetFilter())
	if err != nil {
		return err
	}
	return l.stream(stream, f.OversizeLists, wrapStreamedSandboxes)
}
