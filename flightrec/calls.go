// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// recentCalls is how many returned calls a Calls keeps.
const recentCalls = 64

// Calls tracks pleg's CRI calls from outside the generator: each call in
// flight with its start, the last ones that returned, what the event
// stream delivered and whether the whole-node lists changed. Wrap the
// runtime the generator is given with Wrap. It is safe for concurrent use.
type Calls struct {
	now func() time.Time

	mu       sync.Mutex
	next     uint64
	inFlight map[uint64]Call
	recent   []Call // a ring of recentCalls
	head     int

	streamOpen  bool
	events      uint64
	lastEventAt time.Time
	// listDigest is a digest of the last whole-node container list's IDs
	// and states; unexplained is when a list first showed a change that
	// no event told since the list before it, zero when none waits.
	listDigest  uint64
	lastListAt  time.Time
	unexplained time.Time
}

// NewCalls returns a tracker reading the time from now (time.Now if nil).
func NewCalls(now func() time.Time) *Calls {
	if now == nil {
		now = time.Now
	}
	return &Calls{now: now, inFlight: make(map[uint64]Call)}
}

func (c *Calls) start(op, id string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.inFlight[c.next] = Call{Op: op, ID: id, Start: c.now()}
	return c.next
}

func (c *Calls) end(n uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := c.inFlight[n]
	delete(c.inFlight, n)
	call.Seconds = c.now().Sub(call.Start).Seconds()
	if err != nil {
		call.Error = err.Error()
	}
	if len(c.recent) < recentCalls {
		c.recent = append(c.recent, call)
		return
	}
	c.recent[c.head] = call
	c.head = (c.head + 1) % recentCalls
}

// InFlight returns the calls in flight, the oldest first, each with its
// age at now.
func (c *Calls) InFlight(now time.Time) []Call {
	c.mu.Lock()
	out := make([]Call, 0, len(c.inFlight))
	for _, call := range c.inFlight {
		call.Seconds = now.Sub(call.Start).Seconds()
		out = append(out, call)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Call) int { return a.Start.Compare(b.Start) })
	return out
}

// Recent returns the last calls that returned, the oldest first.
func (c *Calls) Recent() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Call, 0, len(c.recent))
	out = append(out, c.recent[c.head:]...)
	return append(out, c.recent[:c.head]...)
}

// Stream returns what the event stream delivered.
func (c *Calls) Stream() StreamView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return StreamView{Open: c.streamOpen, Events: c.events, LastEventAt: c.lastEventAt}
}

// Unexplained returns since when the whole-node lists have shown a change
// that no event told, or zero.
func (c *Calls) Unexplained() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unexplained
}

func (c *Calls) event() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events++
	c.lastEventAt = c.now()
	c.unexplained = time.Time{}
}

func (c *Calls) setStreamOpen(open bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streamOpen = open
	if !open {
		c.unexplained = time.Time{}
	}
}

// listed notes a whole-node container list made at start: a change from
// the last one while the stream is open and told nothing since that list
// is unexplained.
func (c *Calls) listed(start time.Time, items []*runtimeapi.Container) {
	h := fnv.New64a()
	ids := make([]string, 0, len(items))
	states := make(map[string]runtimeapi.ContainerState, len(items))
	for _, it := range items {
		ids = append(ids, it.GetId())
		states[it.GetId()] = it.GetState()
	}
	slices.Sort(ids)
	for _, id := range ids {
		_, _ = h.Write([]byte(id))
		_, _ = h.Write([]byte{byte(states[id]), 0})
	}
	d := h.Sum64()
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := !c.lastListAt.IsZero() && d != c.listDigest
	if changed && c.streamOpen && c.unexplained.IsZero() && c.lastEventAt.Before(c.lastListAt) {
		c.unexplained = start
	}
	c.listDigest, c.lastListAt = d, start
}

// Wrap returns rt with its calls tracked. The result is an EventSource
// exactly when rt is one.
func (c *Calls) Wrap(rt runtime.Runtime) runtime.Runtime {
	t := &tracked{rt: rt, c: c}
	if src, ok := rt.(runtime.EventSource); ok {
		return &trackedSource{tracked: t, src: src}
	}
	return t
}

// listOf names what a list asks for: "" for the whole node, pod=UID for
// one pod's (the generator's relist of one pod), else the selector.
func listOf(selector map[string]string) string {
	if len(selector) == 0 {
		return ""
	}
	if uid, ok := selector[runtime.PodUIDLabel]; ok && len(selector) == 1 {
		return "pod=" + uid
	}
	keys := make([]string, 0, len(selector))
	for k, v := range selector {
		keys = append(keys, k+"="+v)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// wholeNode tells a list of every container, the relist's: the lists of
// one pod or of exited containers alone say nothing of the node's changes.
func wholeNode(f *runtimeapi.ContainerFilter) bool {
	return len(f.GetLabelSelector()) == 0 && f.GetState() == nil && f.GetId() == "" && f.GetPodSandboxId() == ""
}

type tracked struct {
	rt runtime.Runtime
	c  *Calls
}

func (t *tracked) ListPodSandbox(
	ctx context.Context, f *runtimeapi.PodSandboxFilter,
) ([]*runtimeapi.PodSandbox, error) {
	n := t.c.start(runtime.OpListPodSandbox, listOf(f.GetLabelSelector()))
	items, err := t.rt.ListPodSandbox(ctx, f)
	t.c.end(n, err)
	return items, err
}

func (t *tracked) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	n := t.c.start(runtime.OpListContainers, listOf(f.GetLabelSelector()))
	start := t.c.now()
	items, err := t.rt.ListContainers(ctx, f)
	t.c.end(n, err)
	if err == nil && wholeNode(f) {
		t.c.listed(start, items)
	}
	return items, err
}

func (t *tracked) PodSandboxStatus(
	ctx context.Context, id string, verbose bool,
) (*runtimeapi.PodSandboxStatusResponse, error) {
	n := t.c.start(runtime.OpPodSandboxStatus, id)
	resp, err := t.rt.PodSandboxStatus(ctx, id, verbose)
	t.c.end(n, err)
	return resp, err
}

func (t *tracked) ContainerStatus(
	ctx context.Context, id string, verbose bool,
) (*runtimeapi.ContainerStatusResponse, error) {
	n := t.c.start(runtime.OpContainerStatus, id)
	resp, err := t.rt.ContainerStatus(ctx, id, verbose)
	t.c.end(n, err)
	return resp, err
}

type trackedSource struct {
	*tracked
	src runtime.EventSource
}

// GetContainerEvents implements runtime.EventSource: the stream returned
// counts what it delivers.
func (t *trackedSource) GetContainerEvents(ctx context.Context) (runtime.EventStream, error) {
	stream, err := t.src.GetContainerEvents(ctx)
	if err != nil {
		return nil, err
	}
	t.c.setStreamOpen(true)
	return wrapStream(stream, t.c), nil
}

// countedStream counts the events of a stream; it is a RemovalReporter
// exactly when the stream is one, which the generator asks.
type countedStream struct {
	s runtime.EventStream
	c *Calls
}

func (s *countedStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	ev, err := s.s.Recv()
	if err != nil {
		s.c.setStreamOpen(false)
		return ev, err
	}
	s.c.event()
	return ev, nil
}

type countedRemovalStream struct {
	*countedStream
	runtime.RemovalReporter
}

func wrapStream(s runtime.EventStream, c *Calls) runtime.EventStream {
	cs := &countedStream{s: s, c: c}
	if r, ok := s.(runtime.RemovalReporter); ok {
		return &countedRemovalStream{countedStream: cs, RemovalReporter: r}
	}
	return cs
}
