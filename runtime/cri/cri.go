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
//   - messages up to MaxRecvMsgSize (64 MiB) are accepted, and lists use the
//     StreamPodSandboxes and StreamContainers RPCs where the runtime offers
//     them, falling back for good to the unary lists once it answers
//     Unimplemented;
//   - list items are decoded lean, keeping only what relisting reads (see
//     Options.FullLists).
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

	"github.com/plegkit/pleg/runtime"
)

// Defaults of Options.
const (
	DefaultEndpoint       = "unix:///run/containerd/containerd.sock"
	DefaultRequestTimeout = 2 * time.Minute
	DefaultConnectTimeout = 10 * time.Second
	DefaultMaxRecvMsgSize = 64 << 20
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
	// MaxRecvMsgSize is the largest message accepted; default 64 MiB.
	MaxRecvMsgSize int
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
	// listOpts are the call options of the list RPCs, statusOpts those of
	// the status RPCs.
	listOpts, statusOpts []grpc.CallOption
	// Set once the runtime answered Unimplemented to a streaming list.
	noSandboxStream   atomic.Bool
	noContainerStream atomic.Bool
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
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
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
	}
	r.statusOpts = []grpc.CallOption{grpc.ForceCodecV2(newLeanCodec())}
	if !opts.FullLists {
		r.listOpts = r.statusOpts
	}
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
		return "", fmt.Errorf("cri: endpoint %q: want an absolute socket path, as in unix:///run/containerd/containerd.sock", endpoint)
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
	return r.client.Version(ctx, &runtimeapi.VersionRequest{})
}

// Status returns the runtime's conditions.
func (r *Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return r.client.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
}

// ListPodSandbox implements runtime.Runtime.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if !r.opts.DisableStreaming && !r.noSandboxStream.Load() {
		stream, err := r.client.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{Filter: filter}, r.listOpts...)
		items, err := DrainList(stream, err, (*runtimeapi.StreamPodSandboxesResponse).GetPodSandboxes)
		if !r.unimplemented(err, &r.noSandboxStream, "StreamPodSandboxes") {
			return items, err
		}
	}
	resp, err := r.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter}, r.listOpts...)
	return resp.GetItems(), err
}

// ListContainers implements runtime.Runtime.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if !r.opts.DisableStreaming && !r.noContainerStream.Load() {
		stream, err := r.client.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{Filter: filter}, r.listOpts...)
		items, err := DrainList(stream, err, (*runtimeapi.StreamContainersResponse).GetContainers)
		if !r.unimplemented(err, &r.noContainerStream, "StreamContainers") {
			return items, err
		}
	}
	resp, err := r.client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter}, r.listOpts...)
	return resp.GetContainers(), err
}

// PodSandboxStatus implements runtime.Runtime.
func (r *Runtime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return r.client.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose}, r.statusOpts...)
}

// ContainerStatus implements runtime.Runtime.
func (r *Runtime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return r.client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose}, r.statusOpts...)
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

// DrainList reads a streamed list (StreamPodSandboxes, StreamContainers)
// to its end, gathering the items of every message; err is the error of
// opening the stream, returned as it is.
func DrainList[M, T any](stream grpc.ServerStreamingClient[M], err error, items func(*M) []T) ([]T, error) {
	if err != nil {
		return nil, err
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
// container event stream, with no deadline but ctx's.
func (r *Runtime) GetContainerEvents(ctx context.Context) (runtime.EventStream, error) {
	return r.client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{}, r.statusOpts...)
}

var _ runtime.EventSource = (*Runtime)(nil)
