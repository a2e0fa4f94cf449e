// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime/cri"
)

// contentTypes records the content-type header of every call a gRPC
// server receives, by method.
type contentTypes struct {
	mu     sync.Mutex
	byCall map[string][]string
}

func (c *contentTypes) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byCall[method] = append(c.byCall[method], md.Get("content-type")...)
}

func (c *contentTypes) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			c.record(ctx, info.FullMethod)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			c.record(ss.Context(), info.FullMethod)
			return h(srv, ss)
		}),
	}
}

// TestContentTypeIsPlainGRPC: every call the adapter makes reaches the
// runtime as content-type application/grpc, exactly. CRI-O serves gRPC
// and HTTP on one socket through cmux, which hands a connection to its
// gRPC server only on that exact header and drops the others: a call sent
// as application/grpc+proto (what grpc-go sends for a forced codec named
// "proto") fails with Unavailable, and pleg was blind on CRI-O.
func TestContentTypeIsPlainGRPC(t *testing.T) {
	const svc = "/runtime.v1.RuntimeService/"
	for _, tc := range []struct {
		name      string
		streaming bool
		opts      cri.Options
		want      []string // the methods that must have been called
	}{
		{name: "streamed lists", streaming: true,
			want: []string{"StreamPodSandboxes", "StreamContainers"}},
		{name: "unary lists after the streams are refused",
			want: []string{"StreamPodSandboxes", "StreamContainers", "ListPodSandbox", "ListContainers"}},
		{name: "whole lists", opts: cri.Options{FullLists: true, DisableStreaming: true},
			want: []string{"ListPodSandbox", "ListContainers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := &contentTypes{byCall: map[string][]string{}}
			path := socketPath(t)
			serve(t, path, &server{rt: onePod(), streaming: tc.streaming,
				events: []*runtimeapi.ContainerEventResponse{{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT}},
			}, got.options()...)
			opts := tc.opts
			opts.Endpoint = path
			r := newRuntime(t, opts)
			ctx := t.Context()

			if _, err := r.ListPodSandbox(ctx, nil); err != nil {
				t.Fatalf("ListPodSandbox: %v", err)
			}
			if _, err := r.ListContainers(ctx, nil); err != nil {
				t.Fatalf("ListContainers: %v", err)
			}
			if _, err := r.PodSandboxStatus(ctx, "s1", false); err != nil {
				t.Fatalf("PodSandboxStatus: %v", err)
			}
			if _, err := r.ContainerStatus(ctx, "c1", false); err != nil {
				t.Fatalf("ContainerStatus: %v", err)
			}
			if _, err := r.Version(ctx); err != nil {
				t.Fatalf("Version: %v", err)
			}
			if _, err := r.Status(ctx, false); err != nil {
				t.Fatalf("Status: %v", err)
			}
			stream, err := r.GetContainerEvents(ctx)
			if err != nil {
				t.Fatalf("GetContainerEvents: %v", err)
			}
			if ev, err := stream.Recv(); err != nil || ev.GetContainerId() != "c1" {
				t.Fatalf("first event = %v, %v", ev, err)
			}
			if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("end of the event stream = %v, want EOF", err)
			}

			want := append(slices.Clone(tc.want), "PodSandboxStatus", "ContainerStatus", "Version", "Status", "GetContainerEvents")
			got.mu.Lock()
			defer got.mu.Unlock()
			for _, m := range want {
				if len(got.byCall[svc+m]) == 0 {
					t.Errorf("%s was not called; calls seen: %v", m, got.byCall)
				}
			}
			for m, types := range got.byCall {
				for _, ct := range types {
					if ct != "application/grpc" {
						t.Errorf("%s sent content-type %q, want exactly application/grpc", m, ct)
					}
				}
			}
		})
	}
}
