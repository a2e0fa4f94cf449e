// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// server is a CRI RuntimeService over a fake runtime. Streaming lists are
// answered only when streaming is set; the rest is Unimplemented.
type server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	rt          *fakeruntime.Runtime
	streaming   bool
	hang        bool
	streamCalls atomic.Int32
	listCalls   atomic.Int32
	// events are sent to each caller of GetContainerEvents, which then
	// ends the stream, or with holdEvents keeps it open.
	events     []*runtimeapi.ContainerEventResponse
	holdEvents bool
	// sandboxStatus, if set, changes each PodSandboxStatus answer.
	sandboxStatus func(*runtimeapi.PodSandboxStatusResponse)
	// name is the runtime's name in its Version answer; default "fake".
	name string
}

func (s *server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	name := s.name
	if name == "" {
		name = "fake"
	}
	return &runtimeapi.VersionResponse{RuntimeName: name, RuntimeVersion: "1", RuntimeApiVersion: "v1"}, nil
}

func (s *server) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}, nil
}

func (s *server) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	s.listCalls.Add(1)
	items, err := s.rt.ListPodSandbox(ctx, req.GetFilter())
	return &runtimeapi.ListPodSandboxResponse{Items: items}, err
}

func (s *server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	s.listCalls.Add(1)
	items, err := s.rt.ListContainers(ctx, req.GetFilter())
	return &runtimeapi.ListContainersResponse{Containers: items}, err
}

func (s *server) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	s.streamCalls.Add(1)
	if !s.streaming {
		return status.Error(codes.Unimplemented, "method StreamPodSandboxes not implemented")
	}
	items, err := s.rt.ListPodSandbox(stream.Context(), req.GetFilter())
	if err != nil {
		return err
	}
	for len(items) > 0 {
		n := min(len(items), 100)
		if err := stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: items[:n]}); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

func (s *server) StreamContainers(req *runtimeapi.StreamContainersRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	s.streamCalls.Add(1)
	if !s.streaming {
		return status.Error(codes.Unimplemented, "method StreamContainers not implemented")
	}
	items, err := s.rt.ListContainers(stream.Context(), req.GetFilter())
	if err != nil {
		return err
	}
	for len(items) > 0 {
		n := min(len(items), 100)
		if err := stream.Send(&runtimeapi.StreamContainersResponse{Containers: items[:n]}); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

func (s *server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := s.rt.PodSandboxStatus(ctx, req.GetPodSandboxId(), req.GetVerbose())
	if err == nil && s.sandboxStatus != nil {
		s.sandboxStatus(resp)
	}
	return resp, err
}

func (s *server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	if s.hang {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return s.rt.ContainerStatus(ctx, req.GetContainerId(), req.GetVerbose())
}

func (s *server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	for _, ev := range s.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	if s.holdEvents {
		<-stream.Context().Done()
	}
	return nil
}

// serve serves srv on the unix socket path until the returned stop is
// called (or the test ends).
func serve(t *testing.T, path string, srv *server, opts ...grpc.ServerOption) (stop func()) {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	runtimeapi.RegisterRuntimeServiceServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return g.Stop
}

// socketPath returns a socket path in a fresh directory. t.TempDir's
// names can pass the 108 bytes a unix socket path may have.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pleg-cri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

func newRuntime(t *testing.T, opts cri.Options) *cri.Runtime {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := cri.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func onePod() *fakeruntime.Runtime {
	return fakeruntime.New(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "ns",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []fakeruntime.Container{{ID: "c1", Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	})
}

// eventually polls f until it returns nil, for at most 20 s.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		endpoint, want, err string
	}{
		{endpoint: "unix:///run/containerd/containerd.sock", want: "unix:///run/containerd/containerd.sock"},
		{endpoint: "/run/crio/crio.sock", want: "unix:///run/crio/crio.sock"},
		{endpoint: "/run//x/../crio.sock", want: "unix:///run/crio.sock"},
		{endpoint: "tcp://127.0.0.1:1234", err: "only unix sockets"},
		{endpoint: "npipe:////./pipe/containerd", err: "only unix sockets"},
		{endpoint: "unix://relative.sock", err: "absolute socket path"},
		{endpoint: "run/containerd.sock", err: "only unix sockets"},
	} {
		got, err := cri.Target(tc.endpoint)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Target(%q) error = %v, want one saying %q", tc.endpoint, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Target(%q) = %q, %v; want %q", tc.endpoint, got, err, tc.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	for _, opts := range []cri.Options{
		{Endpoint: "tcp://localhost:1"},
		{RequestTimeout: -1},
		{ConnectTimeout: -1},
		{MaxRecvMsgSize: -1},
	} {
		if _, err := cri.New(opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}

func TestRuntimeDownAtStartThenUpThenRestarted(t *testing.T) {
	path := socketPath(t)
	r := newRuntime(t, cri.Options{Endpoint: path})

	// Nothing listens yet: New succeeded, calls fail with Unavailable.
	if _, err := r.ListPodSandbox(t.Context(), nil); status.Code(err) != codes.Unavailable {
		t.Fatalf("call with the runtime down = %v, want Unavailable", err)
	}

	stop := serve(t, path, &server{rt: onePod()})
	eventually(t, "runtime coming up", func() error {
		_, err := r.ListPodSandbox(t.Context(), nil)
		return err
	})

	stop()
	eventually(t, "runtime going down", func() error {
		if _, err := r.ListPodSandbox(t.Context(), nil); status.Code(err) != codes.Unavailable {
			return fmt.Errorf("call answered %w", err)
		}
		return nil
	})

	serve(t, path, &server{rt: onePod()})
	eventually(t, "runtime restarted", func() error {
		items, err := r.ListPodSandbox(t.Context(), nil)
		if err == nil && len(items) != 1 {
			return fmt.Errorf("%d sandboxes", len(items))
		}
		return err
	})
}

func TestRequestTimeout(t *testing.T) {
	path := socketPath(t)
	serve(t, path, &server{rt: onePod(), hang: true})
	r := newRuntime(t, cri.Options{Endpoint: path, RequestTimeout: 50 * time.Millisecond})
	if _, err := r.ContainerStatus(t.Context(), "c1", false); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("hung call = %v, want DeadlineExceeded", err)
	}
	// The deadline is per call: the next call is not affected.
	if _, err := r.PodSandboxStatus(t.Context(), "s1", false); err != nil {
		t.Errorf("call after a timed-out one = %v", err)
	}
}

func TestStatusErrorsKeepTheirCode(t *testing.T) {
	path := socketPath(t)
	serve(t, path, &server{rt: onePod()})
	r := newRuntime(t, cri.Options{Endpoint: path})
	_, err := r.ContainerStatus(t.Context(), "gone", false)
	if !crierrors.IsNotFound(err) {
		t.Errorf("status of an unknown container = %v, want NotFound", err)
	}
}

// bigRuntime lists more than 16 MiB of containers, the kubelet's limit.
func bigRuntime() (*fakeruntime.Runtime, int) { return manyContainers(30_000) }

// manyContainers lists n exited containers with long names and IDs.
func manyContainers(n int) (*fakeruntime.Runtime, int) {
	pods := make([]fakeruntime.Pod, 0, n/10)
	for i := range n / 10 {
		p := fakeruntime.Pod{UID: fmt.Sprintf("uid-%06d-%s", i, strings.Repeat("x", 200)), Name: fmt.Sprintf("pod-%06d-%s", i, strings.Repeat("y", 200)), Namespace: "ns"}
		for j := range 10 {
			p.Containers = append(p.Containers, fakeruntime.Container{ID: fmt.Sprintf("%064d", i*10+j), Name: "exited", State: runtimeapi.ContainerState_CONTAINER_EXITED})
		}
		pods = append(pods, p)
	}
	return fakeruntime.New(pods...), n
}

func TestReceiveLimit(t *testing.T) {
	rt, n := bigRuntime()
	all, _ := rt.ListContainers(t.Context(), nil)
	size := proto.Size(&runtimeapi.ListContainersResponse{Containers: all})
	if size <= 16<<20 {
		t.Fatalf("test list is %d bytes, want more than 16 MiB", size)
	}
	path := socketPath(t)
	serve(t, path, &server{rt: rt})

	r := newRuntime(t, cri.Options{Endpoint: path})
	items, err := r.ListContainers(t.Context(), nil)
	if err != nil || len(items) != n {
		t.Errorf("list of %d bytes with the default limit: %d items, %v", size, len(items), err)
	}

	small := newRuntime(t, cri.Options{Endpoint: path, MaxRecvMsgSize: 16 << 20})
	if _, err := small.ListContainers(t.Context(), nil); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("list of %d bytes with a 16 MiB limit = %v, want ResourceExhausted", size, err)
	}

	// Streamed, the same list comes in batches that each pass the limit.
	streamPath := socketPath(t)
	serve(t, streamPath, &server{rt: rt, streaming: true})
	streamed := newRuntime(t, cri.Options{Endpoint: streamPath, MaxRecvMsgSize: 16 << 20})
	if items, err := streamed.ListContainers(t.Context(), nil); err != nil || len(items) != n {
		t.Errorf("streamed list of %d bytes with a 16 MiB limit: %d items, %v", size, len(items), err)
	}
}

func TestStreamingLists(t *testing.T) {
	rt, n := manyContainers(1000)
	for _, tc := range []struct {
		name            string
		serverStreams   bool
		disable         bool
		wantStreamCalls int32 // over two rounds of both lists
		wantListCalls   int32
	}{
		{name: "runtime streams", serverStreams: true, wantStreamCalls: 4, wantListCalls: 0},
		{name: "runtime without streaming: one try, then unary for good", wantStreamCalls: 2, wantListCalls: 4},
		{name: "streaming disabled", serverStreams: true, disable: true, wantStreamCalls: 0, wantListCalls: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			srv := &server{rt: rt, streaming: tc.serverStreams}
			serve(t, path, srv)
			r := newRuntime(t, cri.Options{Endpoint: path, DisableStreaming: tc.disable})
			for range 2 {
				containers, err := r.ListContainers(t.Context(), nil)
				if err != nil || len(containers) != n {
					t.Fatalf("ListContainers: %d items, %v", len(containers), err)
				}
				if _, err := r.ListPodSandbox(t.Context(), nil); err != nil {
					t.Fatalf("ListPodSandbox: %v", err)
				}
			}
			if got := srv.streamCalls.Load(); got != tc.wantStreamCalls {
				t.Errorf("%d streaming calls, want %d", got, tc.wantStreamCalls)
			}
			if got := srv.listCalls.Load(); got != tc.wantListCalls {
				t.Errorf("%d unary list calls, want %d", got, tc.wantListCalls)
			}
		})
	}
}

func TestFiltersReachTheRuntime(t *testing.T) {
	rt := onePod()
	rt.AddPod(fakeruntime.Pod{UID: "u2", Name: "db", Namespace: "ns",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "s2"}},
		Containers: []fakeruntime.Container{{ID: "c2", Name: "pg"}},
	})
	path := socketPath(t)
	serve(t, path, &server{rt: rt, streaming: true})
	r := newRuntime(t, cri.Options{Endpoint: path})
	sandboxes, err := r.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "u2"}})
	if err != nil || len(sandboxes) != 1 || sandboxes[0].Id != "s2" {
		t.Errorf("filtered sandboxes = %v, %v", sandboxes, err)
	}
	containers, err := r.ListContainers(t.Context(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "u2"}})
	if err != nil || len(containers) != 1 || containers[0].Id != "c2" {
		t.Errorf("filtered containers = %v, %v", containers, err)
	}
}

// TestGeneratorOverGRPC runs the generator over this adapter and a CRI
// server: the runtime comes up after the generator started, which stays
// unhealthy until then.
func TestGeneratorOverGRPC(t *testing.T) {
	path := socketPath(t)
	r := newRuntime(t, cri.Options{Endpoint: path})
	g, err := pleg.New(r, pleg.Options{RelistPeriod: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sub := g.Subscribe()
	defer sub.Close()
	g.Start()
	defer g.Stop()

	if ok, err := g.Healthy(); ok || err.Error() != "pleg has yet to be successful" {
		t.Errorf("Healthy() with the runtime down = %v, %v", ok, err)
	}
	rt := onePod()
	serve(t, path, &server{rt: rt})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	seen := map[string]pleg.EventType{}
	for len(seen) < 2 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for events: %v (seen %v)", err, seen)
		}
		seen[ev.ContainerID] = ev.Type
	}
	if seen["c1"] != pleg.ContainerStarted || seen["s1"] != pleg.ContainerStarted {
		t.Errorf("events %v, want Started for c1 and s1", seen)
	}
	if ok, err := g.Healthy(); !ok {
		t.Errorf("unhealthy once the runtime is up: %v", err)
	}

	_ = rt.SetContainerState("c1", runtimeapi.ContainerState_CONTAINER_EXITED, 2)
	ev, err := sub.Next(ctx)
	if err != nil || ev.Type != pleg.ContainerDied || ev.ContainerID != "c1" {
		t.Errorf("after the container exited: %+v, %v", ev, err)
	}
}
