package runtime

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// OpGetContainerEvents is the operation type of opening the event stream.
const OpGetContainerEvents = "get_container_events"

// EventSource is a runtime with CRI's container event stream
// (GetContainerEvents). A runtime without one answers codes.Unimplemented,
// as CRI servers do for RPCs they lack.
type EventSource interface {
	// GetContainerEvents opens the stream. It lives until ctx ends or the
	// runtime ends it; it has no deadline of its own.
	GetContainerEvents(ctx context.Context) (EventStream, error)
}

// EventStream is an open container event stream.
type EventStream interface {
	// Recv returns the next event, or the error that ended the stream
	// (io.EOF when the runtime closed it).
	Recv() (*runtimeapi.ContainerEventResponse, error)
}

// GetContainerEvents implements EventSource, counting the opening of the
// stream as get_container_events. A runtime without a stream answers
// codes.Unimplemented.
func (i *instrumented) GetContainerEvents(ctx context.Context) (EventStream, error) {
	start := time.Now()
	src, ok := i.rt.(EventSource)
	if !ok {
		err := status.Error(codes.Unimplemented, "the runtime has no container event stream")
		i.m.Observe(OpGetContainerEvents, time.Since(start), err)
		return nil, err
	}
	stream, err := src.GetContainerEvents(ctx)
	i.m.Observe(OpGetContainerEvents, time.Since(start), err)
	return stream, err
}

var _ EventSource = (*instrumented)(nil)
