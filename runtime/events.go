// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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

// RemovalReporter is an event stream that tells what its runtime is known
// to tell of removals (see Capabilities.ContainerRemovalEvents and
// PodRemovalEvents): Supported, Unsupported, or Unknown. A generator looks
// by other means for the removals a stream leaves out, and learns from
// the events themselves where this is wrong.
type RemovalReporter interface {
	RemovalEvents() (containers, pods Availability)
}
