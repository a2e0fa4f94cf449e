// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cri implements runtime.Runtime over the CRI v1 gRPC API of a
// container runtime such as containerd or CRI-O.
//
// It is built on the generated client of k8s.io/cri-api rather than on
// k8s.io/cri-client, which would fail three of our needs: cri-client dials
// eagerly and fails when the runtime is down at start, uses one timeout for
// connecting and for every call, and caps received messages at 16 MiB, the
// limit past which a node with tens of thousands of exited containers can
// no longer be listed and the kubelet's PLEG fails for good. Here:
//
//   - the connection is made on first use and remade after the runtime
//     restarts (backoff from 100 ms to 3 s); a runtime that is down fails
//     calls at once with Unavailable, so a generator reports itself
//     unhealthy and recovers when the runtime comes back;
//   - each call gets RequestTimeout (the kubelet's --runtime-request-timeout,
//     2 m), apart from ConnectTimeout, the time allowed to establish a
//     connection;
//   - messages up to MaxRecvMsgSize (24 MiB, where the kubelet stops at 16)
//     are accepted, and lists use the StreamPodSandboxes and
//     StreamContainers RPCs where the runtime offers them, falling back for
//     good to the unary lists once it answers Unimplemented; a list answer,
//     streamed or not, is refused past MaxListItems items, and a streamed
//     one past MaxListBytes (24 MiB) in all, so that a runtime gone wrong
//     cannot exhaust our memory;
//   - list items are decoded lean, keeping only what relisting reads (see
//     Options.FullLists);
//   - every call goes out as content-type application/grpc, the only one
//     CRI-O's socket admits;
//   - it learns from its calls what the runtime can do, and the size of
//     its lists (Capabilities, ListSizes, Detect).
package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/runtime"
)

// Defaults of Options.
const (
	DefaultEndpoint       = "unix:///run/containerd/containerd.sock"
	DefaultRequestTimeout = 2 * time.Minute
	DefaultConnectTimeout = 10 * time.Second
	// DefaultMaxListBytes bounds a list's answer in all, streamed or not
	// (a unary answer is one message, which DefaultMaxRecvMsgSize bounds
	// alike): half as much again as the kubelet accepts, and what fits
	// the shipped DaemonSet's 256 MiB memory limit. Measured, pleg run
	// over the simulator peaked at 100 MB RSS with a 10 MiB container
	// list, 149 MB at 18 MiB, 230 MB at 34 MiB and 292 MB at 66 MiB
	// (GOMEMLIMIT 230MiB, every container's status in the cache): the
	// list's items and the cache grow together.
	DefaultMaxListBytes   = 24 << 20
	DefaultMaxRecvMsgSize = DefaultMaxListBytes
	// DefaultMaxListItems bounds a list's items: some 30 times the
	// containers of the largest nodes seen, and at most about 200 MB of
	// decoded items.
	DefaultMaxListItems = 1 << 20
)

// Options configure a Runtime.
type Options struct {
	// Endpoint is the runtime's socket: unix:///path, or a bare path;
	// default DefaultEndpoint.
	Endpoint string
	// RequestTimeout bounds each call; default 2 m.
	RequestTimeout time.Duration
	// ConnectTimeout bounds establishing a connection; default 10 s.
	ConnectTimeout time.Duration
	// MaxRecvMsgSize is the largest message accepted; default 24 MiB. A
	// unary list past it fails with ResourceExhausted.
	MaxRecvMsgSize int
	// MaxListBytes bounds the answer of a streamed list, all its messages
	// together; default DefaultMaxListBytes. Past it the list fails with
	// ResourceExhausted.
	MaxListBytes int
	// MaxListItems bounds the items of a list's answer, streamed or not;
	// default DefaultMaxListItems. It is checked before items are
	// decoded: a message of empty items costs 2 bytes on the wire and a
	// hundred times that decoded.
	MaxListItems int
	// DisableStreaming makes lists use the unary RPCs only.
	DisableStreaming bool
	// FullLists decodes list items whole. By default they are decoded
	// lean: IDs, metadata, state, creation time and the kubelet's
	// io.kubernetes.* labels, all that relisting reads, at a fraction of
	// the time and memory. Statuses are always whole.
	FullLists bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Runtime is a CRI runtime reached over gRPC. It is safe for concurrent
// use.
type Runtime struct {
	conn   *grpc.ClientConn
	client runtimeapi.RuntimeServiceClient
	opts   Options
	log    *slog.Logger
	// statusOpts are the call options of the status RPCs; lists get a
	// codec of their own per call (see listCodec).
	statusOpts []grpc.CallOption
	// Set once the runtime answered Unimplemented to a streaming list.
	noSandboxStream   atomic.Bool
	noContainerStream atomic.Bool
	obs               *observer
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a runtime for opts.Endpoint without connecting: the first
// call connects. It fails only on invalid options.
func New(opts Options) (*Runtime, error) {
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MaxRecvMsgSize == 0 {
		opts.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if opts.MaxListBytes == 0 {
		opts.MaxListBytes = DefaultMaxListBytes
	}
	if opts.MaxListItems == 0 {
		opts.MaxListItems = DefaultMaxListItems
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.RequestTimeout < 0:
		return nil, fmt.Errorf("cri: request timeout %v must be positive", opts.RequestTimeout)
	case opts.ConnectTimeout < 0:
		return nil, fmt.Errorf("cri: connect timeout %v must be positive", opts.ConnectTimeout)
	case opts.MaxRecvMsgSize < 0:
		return nil, fmt.Errorf("cri: receive limit %d must be positive", opts.MaxRecvMsgSize)
	case opts.MaxListBytes < 0:
		return nil, fmt.Errorf("cri: list limit %d bytes must be positive", opts.MaxListBytes)
	case opts.MaxListItems < 0:
		return nil, fmt.Errorf("cri: list limit %d items must be positive", opts.MaxListItems)
	}
	target, err := Target(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxRecvMsgSize)),
		grpc.WithConnectParams(grpc.ConnectParams{
			// gRPC's default backoff grows to 2 minutes: after a runtime
			// restart the generator would stay blind that long.
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   3 * time.Second,
			},
			MinConnectTimeout: opts.ConnectTimeout,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("cri: %s: %w", opts.Endpoint, err)
	}
	r := &Runtime{
		conn:   conn,
		client: runtimeapi.NewRuntimeServiceClient(conn),
		opts:   opts,
		log:    opts.Logger,
		obs:    newObserver(opts.MaxRecvMsgSize, !opts.DisableStreaming),
	}
	r.statusOpts = []grpc.CallOption{grpc.ForceCodecV2(newLeanCodec())}
	return r, nil
}

// Target turns a runtime endpoint into a gRPC target: unix:///path, or a
// bare absolute path, which means the same. Only unix sockets are
// supported, as by the kubelet on Linux.
func Target(endpoint string) (string, error) {
	if strings.HasPrefix(endpoint, "/") {
		return "unix://" + filepath.Clean(endpoint), nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("cri: endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "unix" {
		return "", fmt.Errorf("cri: endpoint %q: only unix sockets are supported (unix:///path/to/socket)", endpoint)
	}
	if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
		return "", fmt.Errorf(
			"cri: endpoint %q: want an absolute socket path, as in unix:///run/containerd/containerd.sock",
			endpoint,
		)
	}
	return "unix://" + filepath.Clean(u.Path), nil
}

// Endpoint returns the endpoint the runtime talks to.
func (r *Runtime) Endpoint() string { return r.opts.Endpoint }

// Client returns the raw CRI client, for calls outside runtime.Runtime.
// Its calls get no deadline but the caller's.
func (r *Runtime) Client() runtimeapi.RuntimeServiceClient { return r.client }

// Close closes the connection.
func (r *Runtime) Close() error { return r.conn.Close() }

func (r *Runtime) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.RequestTimeout)
}

// Version returns the runtime's name and versions.
func (r *Runtime) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	v, err := r.client.Version(ctx, &runtimeapi.VersionRequest{})
	if err == nil {
		r.obs.version(v)
	}
	return v, err
}

// Status returns the runtime's conditions.
func (r *Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return r.client.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
}

// ListPodSandbox implements runtime.Runtime.
func (r *Runtime) ListPodSandbox(
	ctx context.Context,
	filter *runtimeapi.PodSandboxFilter,
) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	n := r.newCounter()
	if !r.opts.DisableStreaming && !r.noSandboxStream.Load() {
		stream, err := r.client.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{Filter: filter}, r.listCodec(n))
		items, err := drainList(stream, err, (*runtimeapi.StreamPodSandboxesResponse).GetPodSandboxes, n)
		r.obs.streamedList("StreamPodSandboxes", err)
		if !r.unimplemented(err, &r.noSandboxStream, "StreamPodSandboxes") {
			r.listed(filter == nil, true, len(items), n, err)
			return items, r.listError(err, "StreamPodSandboxes", n)
		}
		n = r.newCounter()
	}
	resp, err := r.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter}, r.listCodec(n))
	r.listed(filter == nil, true, len(resp.GetItems()), n, err)
	return resp.GetItems(), r.listError(err, "ListPodSandbox", n)
}

// ListContainers implements runtime.Runtime.
func (r *Runtime) ListContainers(
	ctx context.Context,
	filter *runtimeapi.ContainerFilter,
) ([]*runtimeapi.Container, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	n := r.newCounter()
	if !r.opts.DisableStreaming && !r.noContainerStream.Load() {
		stream, err := r.client.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{Filter: filter}, r.listCodec(n))
		items, err := drainList(stream, err, (*runtimeapi.StreamContainersResponse).GetContainers, n)
		r.obs.streamedList("StreamContainers", err)
		if !r.unimplemented(err, &r.noContainerStream, "StreamContainers") {
			r.listed(filter == nil, false, len(items), n, err)
			return items, r.listError(err, "StreamContainers", n)
		}
		n = r.newCounter()
	}
	resp, err := r.client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter}, r.listCodec(n))
	r.listed(filter == nil, false, len(resp.GetContainers()), n, err)
	return resp.GetContainers(), r.listError(err, "ListContainers", n)
}

// listed records the size of a whole-node list's answer.
func (r *Runtime) listed(whole, sandboxes bool, items int, n *counter, err error) {
	if whole && err == nil {
		r.obs.list(sandboxes, items, n, n.messages > 1 || n.streamed)
	}
}

// listError turns the error of a list whose answer was refused for its
// size (by n, or by gRPC's receive limit) into one that says so and what
// to do, and logs it as a warning: raising the limits is the operator's
// decision. The instrumented runtime counts it as the list operation's
// error.
func (r *Runtime) listError(err error, rpc string, n *counter) error {
	switch {
	case err == nil:
		return nil
	case n.refused != nil:
		err = n.refused
	case status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "larger than max"):
		// gRPC's own words, which pleg doctor reads the size from, after
		// ours.
		err = status.Errorf(codes.ResourceExhausted, "cri: the %s answer is one message larger than the %s a message "+
			"accepted "+
			"(MaxRecvMsgSize)%s: %s", rpc, msgsize.MiB(r.opts.MaxRecvMsgSize, -1), whatToDo, status.Convert(err).Message())
	default:
		return err
	}
	r.log.Warn("Runtime's list answer refused for its size", "rpc", rpc, "err", err, "endpoint", r.opts.Endpoint)
	return err
}

// whatToDo follows a list refused for its size.
const whatToDo = "; remove exited containers, or raise the limit (pleg run --max-list-size) with the memory limit"

// PodSandboxStatus implements runtime.Runtime.
func (r *Runtime) PodSandboxStatus(
	ctx context.Context,
	id string,
	verbose bool,
) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.client.PodSandboxStatus(
		ctx,
		&runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose},
		r.statusOpts...)
	if err == nil {
		r.obs.sandboxStatus(resp)
	}
	return resp, err
}

// ContainerStatus implements runtime.Runtime.
func (r *Runtime) ContainerStatus(
	ctx context.Context,
	id string,
	verbose bool,
) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return r.client.ContainerStatus(
		ctx,
		&runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose},
		r.statusOpts...)
}

// unimplemented reports whether err says the runtime lacks the streaming
// RPC, and remembers it in flag: runtimes do not grow RPCs while running.
func (r *Runtime) unimplemented(err error, flag *atomic.Bool, rpc string) bool {
	if status.Code(err) != codes.Unimplemented {
		return false
	}
	if !flag.Swap(true) {
		r.log.Info("Runtime has no streaming list; using the unary one", "rpc", rpc, "endpoint", r.opts.Endpoint)
	}
	return true
}

// drainList reads a streamed list (StreamPodSandboxes, StreamContainers)
// to its end, gathering the items of every message; err is the error of
// opening the stream, returned as it is. n, if not nil, is the counter
// of the call's codec, which refuses an answer past its limits.
func drainList[M, T any](stream grpc.ServerStreamingClient[M], err error, items func(*M) []T, n *counter) ([]T, error) {
	if err != nil {
		return nil, err
	}
	if n != nil {
		n.streamed = true
	}
	var out []T
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, items(m)...)
	}
}

// GetContainerEvents implements runtime.EventSource: it opens CRI's
// container event stream, with no deadline but ctx's. What the stream
// shows of the runtime (whether it has one, what its events carry) is
// recorded in Capabilities.
func (r *Runtime) GetContainerEvents(ctx context.Context) (runtime.EventStream, error) {
	if r.obs.snapshot().RuntimeName == "" {
		// Which runtime it is tells what its stream leaves out
		// (RemovalEvents); a runtime that does not answer has no stream
		// either, and that shows below.
		_, _ = r.Version(ctx)
	}
	stream, err := r.client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{}, r.statusOpts...)
	if err != nil {
		r.obs.streamEnded(err, false)
		return nil, err
	}
	s := &observedStream{stream: stream, obs: r.obs, opened: time.Now()}
	// A stream that stays open without an event is one all the same.
	s.held = time.AfterFunc(streamHeld, func() {
		if !s.ended.Load() {
			s.obs.streamEnded(io.EOF, true)
		}
	})
	return s, nil
}

// observedStream is an event stream whose events and end the adapter
// learns from.
type observedStream struct {
	stream runtimeapi.RuntimeService_GetContainerEventsClient
	obs    *observer
	opened time.Time
	held   *time.Timer
	ended  atomic.Bool
}

func (s *observedStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	ev, err := s.stream.Recv()
	if err != nil {
		s.ended.Store(true)
		s.held.Stop()
		s.obs.streamEnded(err, time.Since(s.opened) >= streamHeld)
		return nil, err
	}
	s.obs.event(ev)
	return ev, nil
}

// RemovalEvents implements runtime.RemovalReporter: what the runtime is
// known to tell of removals, by its name, or as its events showed.
func (s *observedStream) RemovalEvents() (containers, pods runtime.Availability) {
	return s.obs.removalEvents()
}

var (
	_ runtime.EventSource     = (*Runtime)(nil)
	_ runtime.RemovalReporter = (*observedStream)(nil)
)
