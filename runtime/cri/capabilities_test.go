// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

func capability(a runtime.Availability, detail string) runtime.Capability {
	return runtime.Capability{Availability: a, Detail: detail}
}

// The adapter learns what the runtime can do from the calls the
// generator makes anyway: a streaming list, a PodSandboxStatus, the event
// stream and its events.
func TestCapabilitiesLearnedFromCalls(t *testing.T) {
	started := &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		PodSandboxStatus: &runtimeapi.PodSandboxStatus{Id: "s1"}, ContainersStatuses: []*runtimeapi.ContainerStatus{{Id: "c1"}}}
	bare := &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT}
	for _, tc := range []struct {
		name string
		srv  *server
		want runtime.Capabilities
	}{
		{
			name: "containerd 2.x: streams, events with the pod, a stream that holds; no statuses in PodSandboxStatus",
			srv:  &server{streaming: true, events: []*runtimeapi.ContainerEventResponse{started}, holdEvents: true},
			want: runtime.Capabilities{
				ContainerEvents:         capability(runtime.Supported, "events arrive"),
				PodEvents:               capability(runtime.Supported, "events carry the sandbox status and the container statuses"),
				StreamingLists:          capability(runtime.Supported, "StreamContainers answered"),
				SandboxStatusContainers: capability(runtime.Unsupported, "no Timestamp, no ContainersStatuses"),
			},
		},
		{
			name: "containerd 2.0.0-2.0.2: a Timestamp without the statuses",
			srv: &server{sandboxStatus: func(r *runtimeapi.PodSandboxStatusResponse) { r.Timestamp = 1 },
				events: []*runtimeapi.ContainerEventResponse{bare}, holdEvents: true},
			want: runtime.Capabilities{
				ContainerEvents:         capability(runtime.Supported, "events arrive"),
				PodEvents:               capability(runtime.Unsupported, "an event came without the sandbox status"),
				StreamingLists:          capability(runtime.Unsupported, "StreamContainers is Unimplemented"),
				SandboxStatusContainers: capability(runtime.Unsupported, "Timestamp set without ContainersStatuses"),
			},
		},
		{
			name: "CRI-O without pod events: the stream ends at once; statuses in PodSandboxStatus",
			srv: &server{streaming: true, sandboxStatus: func(r *runtimeapi.PodSandboxStatusResponse) {
				r.Timestamp, r.ContainersStatuses = 1, []*runtimeapi.ContainerStatus{{Id: "c1"}}
			}},
			want: runtime.Capabilities{
				ContainerEvents:         capability(runtime.Unsupported, "the stream ends at once"),
				PodEvents:               capability(runtime.Unknown, "no event seen yet"),
				StreamingLists:          capability(runtime.Supported, "StreamContainers answered"),
				SandboxStatusContainers: capability(runtime.Supported, "Timestamp and ContainersStatuses set"),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			srv := tc.srv
			srv.rt = onePod()
			serve(t, path, srv)
			r := newRuntime(t, cri.Options{Endpoint: path})

			before := r.Capabilities()
			for _, c := range []runtime.Capability{before.ContainerEvents, before.PodEvents, before.StreamingLists, before.SandboxStatusContainers} {
				if c.Availability != runtime.Unknown {
					t.Errorf("before any call: %+v", before)
				}
			}
			ctx := t.Context()
			if _, err := r.Version(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ListPodSandbox(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ListContainers(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := r.PodSandboxStatus(ctx, "s1", false); err != nil {
				t.Fatal(err)
			}
			stream, err := r.GetContainerEvents(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for range srv.events {
				if _, err := stream.Recv(); err != nil {
					t.Fatal(err)
				}
			}
			if !srv.holdEvents {
				_, err := stream.Recv()
				t.Logf("end of the stream: %v", err)
			}
			got := r.Capabilities()
			if got.RuntimeName != "fake" || got.RuntimeVersion != "1" {
				t.Errorf("runtime %q %q, want fake 1", got.RuntimeName, got.RuntimeVersion)
			}
			for name, c := range map[string][2]runtime.Capability{
				"event stream":            {got.ContainerEvents, tc.want.ContainerEvents},
				"pod events":              {got.PodEvents, tc.want.PodEvents},
				"streaming lists":         {got.StreamingLists, tc.want.StreamingLists},
				"statuses in sandbox one": {got.SandboxStatusContainers, tc.want.SandboxStatusContainers},
			} {
				if c[0] != c[1] {
					t.Errorf("%s: %+v, want %+v", name, c[0], c[1])
				}
			}
		})
	}
}

// A stream that stays open without an event is a stream all the same.
func TestIdleEventStreamIsSupported(t *testing.T) {
	path := socketPath(t)
	serve(t, path, &server{rt: onePod(), holdEvents: true})
	r := newRuntime(t, cri.Options{Endpoint: path})
	if _, err := r.GetContainerEvents(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle stream to count as one", func() error {
		if c := r.Capabilities().ContainerEvents; c != capability(runtime.Supported, "stream open") {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
}

// Once a pod answered with its statuses, a pod without containers (which
// has none to give) does not make it unsupported again.
func TestSandboxStatusContainersIsSticky(t *testing.T) {
	path := socketPath(t)
	withStatuses := true
	serve(t, path, &server{rt: onePod(), sandboxStatus: func(r *runtimeapi.PodSandboxStatusResponse) {
		r.Timestamp = 1
		if withStatuses {
			r.ContainersStatuses = []*runtimeapi.ContainerStatus{{Id: "c1"}}
		}
	}})
	r := newRuntime(t, cri.Options{Endpoint: path})
	for _, ws := range []bool{true, false} {
		withStatuses = ws
		if _, err := r.PodSandboxStatus(t.Context(), "s1", false); err != nil {
			t.Fatal(err)
		}
	}
	if c := r.Capabilities().SandboxStatusContainers; c.Availability != runtime.Supported {
		t.Errorf("after a pod with statuses then one without: %+v", c)
	}
}

func TestListSizes(t *testing.T) {
	rt, n := manyContainers(1000)
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			path := socketPath(t)
			serve(t, path, &server{rt: rt, streaming: streaming})
			r := newRuntime(t, cri.Options{Endpoint: path, MaxRecvMsgSize: 32 << 20})
			if s := r.ListSizes(); s.LimitBytes != 32<<20 || !s.Containers.At.IsZero() || s.Headroom() != 1 {
				t.Errorf("before any list: %+v", s)
			}
			all, _ := rt.ListContainers(t.Context(), nil)
			if _, err := r.ListContainers(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			s := r.ListSizes()
			c := s.Containers
			wire := proto.Size(&runtimeapi.ListContainersResponse{Containers: all})
			if c.Items != n || c.Streamed != streaming || c.At.IsZero() {
				t.Errorf("containers %+v, want %d items, streamed %v", c, n, streaming)
			}
			// Streamed, the items come 100 a message, each a little
			// smaller than its share of the whole.
			if !streaming && (c.Bytes != wire || c.LargestMessageBytes != wire) || streaming && (c.Bytes < wire-20 || c.Bytes > wire || c.LargestMessageBytes > wire/5) {
				t.Errorf("containers %+v, the list is %d bytes", c, wire)
			}
			if h := s.Headroom(); h != 1-float64(c.LargestMessageBytes)/float64(32<<20) {
				t.Errorf("headroom %v", h)
			}
			// A pod's list is not the node's.
			if _, err := r.ListContainers(t.Context(), runtime.ContainerFilterForPod("uid-000001-"+strings.Repeat("x", 200))); err != nil {
				t.Fatal(err)
			}
			if got := r.ListSizes().Containers; got != c {
				t.Errorf("a filtered list changed the sizes: %+v, was %+v", got, c)
			}
			if !strings.Contains(s.String(), "containers 1000 in ") {
				t.Errorf("String() = %q", s.String())
			}
		})
	}
}

// A list answer past the limits fails clearly, before it is decoded:
// the total of a streamed list, the items of any list.
func TestListLimits(t *testing.T) {
	rt, _ := manyContainers(1000)
	all, _ := rt.ListContainers(t.Context(), nil)
	wire := proto.Size(&runtimeapi.ListContainersResponse{Containers: all})
	for _, tc := range []struct {
		name      string
		streaming bool
		opts      cri.Options
		want      string
	}{
		{name: "streamed past the bytes", streaming: true, opts: cri.Options{MaxListBytes: wire / 2}, want: "passed"},
		{name: "streamed past the items", streaming: true, opts: cri.Options{MaxListItems: 999}, want: "passed 999 items"},
		{name: "unary past the items", opts: cri.Options{MaxListItems: 999}, want: "passed 999 items"},
		{name: "whole lists past the items", opts: cri.Options{MaxListItems: 999, FullLists: true}, want: "passed 999 items"},
		{name: "at the limit", streaming: true, opts: cri.Options{MaxListItems: 1000, MaxListBytes: wire}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			serve(t, path, &server{rt: rt, streaming: tc.streaming})
			opts := tc.opts
			opts.Endpoint = path
			r := newRuntime(t, opts)
			items, err := r.ListContainers(t.Context(), nil)
			if tc.want == "" {
				if err != nil || len(items) != 1000 {
					t.Errorf("%d items, %v", len(items), err)
				}
				return
			}
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), tc.want) || items != nil {
				t.Errorf("%d items, %v; want ResourceExhausted saying %q", len(items), err, tc.want)
			}
			// The next list, of a pod, passes.
			if _, err := r.ListContainers(t.Context(), runtime.ContainerFilterForPod("nobody")); err != nil {
				t.Errorf("a small list after a refused one: %v", err)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	path := socketPath(t)
	serve(t, path, &server{rt: onePod(), streaming: true, holdEvents: true, sandboxStatus: func(r *runtimeapi.PodSandboxStatusResponse) {
		r.Timestamp, r.ContainersStatuses = 1, []*runtimeapi.ContainerStatus{{Id: "c1"}}
	}})
	r := newRuntime(t, cri.Options{Endpoint: path})
	got, err := r.Detect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.RuntimeName != "fake" || got.ContainerEvents != capability(runtime.Supported, "stream open") ||
		got.StreamingLists.Availability != runtime.Supported || got.SandboxStatusContainers.Availability != runtime.Supported ||
		got.Lists.Containers.Items != 1 || got.Lists.PodSandboxes.Items != 1 {
		t.Errorf("Detect = %+v", got)
	}
	for _, l := range got.Lines() {
		// An event shows what events carry; a removal, or the runtime's
		// name, what they tell of removals.
		if strings.Contains(l, "unknown") && !strings.HasPrefix(l, "pod events") && !strings.Contains(l, "removals told") {
			t.Errorf("line %q", l)
		}
	}

	down := newRuntime(t, cri.Options{Endpoint: socketPath(t), ConnectTimeout: time.Second})
	if _, err := down.Detect(t.Context()); status.Code(err) != codes.Unavailable {
		t.Errorf("Detect with the runtime down: %v", err)
	}
}

// What a stream tells of removals is known of containerd and CRI-O by
// their names, until DELETED events show it; the stream says it, for the
// generator to look for the rest.
func TestRemovalEvents(t *testing.T) {
	deleted := func(id string, sandbox *runtimeapi.PodSandboxStatus) *runtimeapi.ContainerEventResponse {
		return &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
			PodSandboxStatus: sandbox}
	}
	pod := &runtimeapi.PodSandboxStatus{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1"}}
	for _, tc := range []struct {
		name       string
		events     []*runtimeapi.ContainerEventResponse
		containers runtime.Capability
		pods       runtime.Capability
	}{
		{"containerd", nil, capability(runtime.Supported, "known of containerd"), capability(runtime.Supported, "known of containerd")},
		{"cri-o", nil, capability(runtime.Supported, "known of CRI-O"),
			capability(runtime.Unsupported, "known of CRI-O: no event when a pod is removed")},
		{"cri-o", []*runtimeapi.ContainerEventResponse{deleted("s1", pod)}, capability(runtime.Supported, "known of CRI-O"),
			capability(runtime.Supported, "a DELETED event arrived for a removed sandbox")},
		{"other", nil, capability(runtime.Unknown, `not known of "other" until a removal shows it`),
			capability(runtime.Unknown, `not known of "other" until a removal shows it`)},
		{"other", []*runtimeapi.ContainerEventResponse{deleted("c1", pod), deleted("s1", nil)},
			capability(runtime.Supported, "a DELETED event arrived for a removed container"),
			capability(runtime.Supported, "a DELETED event arrived for a removed sandbox")},
	} {
		t.Run(fmt.Sprintf("%s/%d events", tc.name, len(tc.events)), func(t *testing.T) {
			path := socketPath(t)
			serve(t, path, &server{rt: onePod(), name: tc.name, events: tc.events, holdEvents: true})
			r := newRuntime(t, cri.Options{Endpoint: path})
			// Opening the stream asks which runtime it is.
			stream, err := r.GetContainerEvents(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for range tc.events {
				if _, err := stream.Recv(); err != nil {
					t.Fatal(err)
				}
			}
			got := r.Capabilities()
			if got.ContainerRemovalEvents != tc.containers || got.PodRemovalEvents != tc.pods {
				t.Errorf("container removals %+v, pod removals %+v; want %+v, %+v", got.ContainerRemovalEvents, got.PodRemovalEvents, tc.containers, tc.pods)
			}
			containers, pods := stream.(runtime.RemovalReporter).RemovalEvents()
			if containers != tc.containers.Availability || pods != tc.pods.Availability {
				t.Errorf("the stream says %s, %s", containers, pods)
			}
		})
	}
}
