// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fakeruntime

import (
	"context"
	"io"

	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// eventStream is one open GetContainerEvents stream. Its buffer is large,
// like containerd's backlog: tests emit in bursts and read later.
type eventStream struct {
	ch   chan *runtimeapi.ContainerEventResponse
	done chan struct{}
	err  error // set before done is closed
	// removals is what the stream says it tells of removals, if it does.
	removals *[2]runtime.Availability
}

// reportingStream is an event stream that says what it tells of
// removals, as the CRI adapter's does.
type reportingStream struct{ *eventStream }

// RemovalEvents implements runtime.RemovalReporter.
func (s reportingStream) RemovalEvents() (containers, pods runtime.Availability) {
	return s.removals[0], s.removals[1]
}

// SetRemovalEvents makes the streams opened from now on say what they
// tell of removals, as runtime.RemovalReporter: containers removed by
// RemoveContainer, and pods removed by RemovePodSandbox. By default they
// say nothing. What the fake sends is what the test emits.
func (r *Runtime) SetRemovalEvents(containers, pods runtime.Availability) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removalEvents = &[2]runtime.Availability{containers, pods}
}

func (s *eventStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	select {
	case ev := <-s.ch:
		return ev, nil
	default:
	}
	select {
	case ev := <-s.ch:
		return ev, nil
	case <-s.done:
		return nil, s.err
	}
}

// EnableEvents turns the event stream on or off. Off, GetContainerEvents
// answers Unimplemented, as a runtime without the stream does.
func (r *Runtime) EnableEvents(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = on
}

// CloseEventsAtOnce makes new streams end at once, cleanly, as CRI-O's do
// when its pod events are off.
func (r *Runtime) CloseEventsAtOnce(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eventsEOF = on
}

// GetContainerEvents implements runtime.EventSource.
func (r *Runtime) GetContainerEvents(ctx context.Context) (runtime.EventStream, error) {
	_, _, _, err := r.begin(runtime.OpGetContainerEvents, "")
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.events {
		return nil, status.Error(codes.Unimplemented, "unknown method GetContainerEvents")
	}
	s := &eventStream{
		ch:       make(chan *runtimeapi.ContainerEventResponse, 10000),
		done:     make(chan struct{}),
		removals: r.removalEvents,
	}
	if r.eventsEOF {
		s.err = io.EOF
		close(s.done)
		return s, nil
	}
	r.streams[s] = struct{}{}
	go func() {
		select {
		case <-ctx.Done():
			r.endStream(s, status.FromContextError(ctx.Err()).Err())
		case <-s.done:
		}
	}()
	if s.removals != nil {
		return reportingStream{s}, nil
	}
	return s, nil
}

func (r *Runtime) endStream(s *eventStream, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.streams[s]; !ok {
		return
	}
	delete(r.streams, s)
	s.err = err
	close(s.done)
}

// EndStreams ends every open stream with err; io.EOF is a clean close.
func (r *Runtime) EndStreams(err error) {
	r.mu.Lock()
	streams := make([]*eventStream, 0, len(r.streams))
	for s := range r.streams {
		streams = append(streams, s)
	}
	r.mu.Unlock()
	for _, s := range streams {
		r.endStream(s, err)
	}
}

// Streams returns the number of open streams.
func (r *Runtime) Streams() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.streams)
}

// Emit sends every open stream an event of type typ about the sandbox or
// container id of pod podUID, carrying, as containerd's do, the status of
// the pod's sandbox and of each of its containers as the runtime holds
// them now, and created_at the time of sending (or at, if not zero).
func (r *Runtime) Emit(podUID, id string, typ runtimeapi.ContainerEventType, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ, CreatedAt: at.UnixNano()}
	if at.IsZero() {
		ev.CreatedAt = time.Now().UnixNano()
	}
	for _, sb := range r.state.sandboxes {
		if sb.GetMetadata().GetUid() == podUID {
			ev.PodSandboxStatus = r.state.sandboxStatus[sb.GetId()]
			break
		}
	}
	if ev.PodSandboxStatus == nil {
		// Gone already: what containerd would still know of it.
		ev.PodSandboxStatus = &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Uid: podUID}}
	}
	for _, c := range r.state.containers {
		if c.GetLabels()[runtime.PodUIDLabel] == podUID {
			if st := r.state.containerStatus[c.GetId()]; st != nil {
				ev.ContainersStatuses = append(ev.ContainersStatuses, st)
			}
		}
	}
	for s := range r.streams {
		select {
		case s.ch <- ev:
		default: // a test that lets 10,000 events pile up has lost track
		}
	}
}
