// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fakeruntime is an in-memory runtime.Runtime for tests and
// benchmarks: pods are scripted as plain values, every operation can be
// given errors, latency or a hang, and calls are counted.
//
// Unlike the fakes in k8s.io/cri-api and k8s.io/cri-client it has latency,
// per-item faults and call counts per item, which relist tests need.
package fakeruntime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/crilist"
	"github.com/plegkit/pleg/runtime"
)

// Op names a runtime operation: one of runtime's Op constants, such as
// runtime.OpListPodSandbox, the kubelet's operation_type.
type Op = string

// Pod scripts one pod. Its sandboxes and containers get kubelet's labels.
type Pod struct {
	UID       string
	Name      string
	Namespace string
	// IPs are reported in the status of the pod's ready sandboxes.
	IPs        []string
	Sandboxes  []Sandbox
	Containers []Container
}

// Sandbox scripts one pod sandbox.
type Sandbox struct {
	ID        string
	State     runtimeapi.PodSandboxState
	CreatedAt int64
}

// Container scripts one container.
type Container struct {
	ID    string
	Name  string
	State runtimeapi.ContainerState
	// SandboxID defaults to the pod's first sandbox.
	SandboxID string
	Attempt   uint32
	CreatedAt int64
	ExitCode  int32
	Reason    string
	// Message is the exited container's status message.
	Message string
	Image   string
}

// Snapshot is the whole state of a fake runtime: what it lists and what it
// answers for each ID. Build one with NewSnapshot, then Load it; building
// snapshots ahead and loading them is how benchmarks switch a large runtime
// between states without paying for the build.
type Snapshot struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container

	sandboxStatus   map[string]*runtimeapi.PodSandboxStatus
	containerStatus map[string]*runtimeapi.ContainerStatus

	// containerAt indexes containers by ID (the first listed, for a
	// duplicated ID), so that churn over thousands of containers costs no
	// scan per change; nil until needed, dropped when positions shift.
	containerAt map[string]int
}

// containerIndex returns the position of container id, or -1.
func (s *Snapshot) containerIndex(id string) int {
	if s.containerAt == nil {
		s.containerAt = make(map[string]int, len(s.containers))
		for i, c := range s.containers {
			if _, dup := s.containerAt[c.GetId()]; c != nil && !dup {
				s.containerAt[c.GetId()] = i
			}
		}
	}
	if i, ok := s.containerAt[id]; ok {
		return i
	}
	return -1
}

func (s *Snapshot) appendContainer(item *runtimeapi.Container, st *runtimeapi.ContainerStatus) {
	if _, dup := s.containerAt[item.Id]; s.containerAt != nil && !dup {
		s.containerAt[item.Id] = len(s.containers)
	}
	s.containers = append(s.containers, item)
	s.containerStatus[item.Id] = st
}

// NewSnapshot builds the runtime state holding pods, listed in the order
// given.
func NewSnapshot(pods ...Pod) *Snapshot {
	s := &Snapshot{
		sandboxStatus:   make(map[string]*runtimeapi.PodSandboxStatus),
		containerStatus: make(map[string]*runtimeapi.ContainerStatus),
	}
	for _, p := range pods {
		s.addPod(p)
	}
	return s
}

func (s *Snapshot) addPod(p Pod) {
	for _, sb := range p.Sandboxes {
		item, st := buildSandbox(p, sb)
		s.sandboxes = append(s.sandboxes, item)
		s.sandboxStatus[sb.ID] = st
	}
	for _, c := range p.Containers {
		s.appendContainer(buildContainer(p, c))
	}
}

// AddRaw adds list items exactly as given, malformed ones included, with the
// statuses the runtime answers for them (nil: the ID is unknown to status
// calls).
func (s *Snapshot) AddRaw(
	sandboxes []*runtimeapi.PodSandbox,
	containers []*runtimeapi.Container,
	sandboxStatus map[string]*runtimeapi.PodSandboxStatus,
	containerStatus map[string]*runtimeapi.ContainerStatus,
) {
	s.sandboxes = append(s.sandboxes, sandboxes...)
	s.containers = append(s.containers, containers...)
	s.containerAt = nil
	maps.Copy(s.sandboxStatus, sandboxStatus)
	maps.Copy(s.containerStatus, containerStatus)
}

func podLabels(p Pod) map[string]string {
	return map[string]string{
		runtime.PodUIDLabel:       p.UID,
		runtime.PodNameLabel:      p.Name,
		runtime.PodNamespaceLabel: p.Namespace,
	}
}

func buildSandbox(p Pod, sb Sandbox) (*runtimeapi.PodSandbox, *runtimeapi.PodSandboxStatus) {
	md := &runtimeapi.PodSandboxMetadata{Name: p.Name, Uid: p.UID, Namespace: p.Namespace}
	labels := podLabels(p)
	item := &runtimeapi.PodSandbox{Id: sb.ID, Metadata: md, State: sb.State, CreatedAt: sb.CreatedAt, Labels: labels}
	st := &runtimeapi.PodSandboxStatus{Id: sb.ID, Metadata: md, State: sb.State, CreatedAt: sb.CreatedAt, Labels: labels}
	if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY && len(p.IPs) > 0 {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: p.IPs[0]}
		for _, ip := range p.IPs[1:] {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	return item, st
}

func buildContainer(p Pod, c Container) (*runtimeapi.Container, *runtimeapi.ContainerStatus) {
	sandboxID := c.SandboxID
	if sandboxID == "" && len(p.Sandboxes) > 0 {
		sandboxID = p.Sandboxes[0].ID
	}
	labels := podLabels(p)
	labels[runtime.ContainerNameLabel] = c.Name
	annotations := map[string]string{runtime.ContainerRestartCountAnnotation: strconv.FormatUint(uint64(c.Attempt), 10)}
	md := &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: c.Attempt}
	image := &runtimeapi.ImageSpec{Image: c.Image}
	item := &runtimeapi.Container{
		Id: c.ID, PodSandboxId: sandboxID, Metadata: md, Image: image, ImageRef: c.Image,
		State: c.State, CreatedAt: c.CreatedAt, Labels: labels, Annotations: annotations,
	}
	st := &runtimeapi.ContainerStatus{
		Id: c.ID, Metadata: md, State: c.State, CreatedAt: c.CreatedAt, Image: image, ImageRef: c.Image,
		Labels: labels, Annotations: annotations,
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		st.StartedAt = c.CreatedAt + 1
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		st.FinishedAt = c.CreatedAt + 2
		st.ExitCode = c.ExitCode
		st.Reason, st.Message = c.Reason, c.Message
		if st.Reason == "" {
			st.Reason = "Completed"
			if c.ExitCode != 0 {
				st.Reason = "Error"
			}
		}
	}
	return item, st
}

// Runtime is the fake. The zero value is not usable; call New.
type Runtime struct {
	mu        sync.Mutex
	state     *Snapshot
	injected  map[Op][]error
	latency   map[Op]time.Duration
	itemErr   map[string]error
	opErr     map[Op]error
	hung      map[string]bool
	calls     map[Op]int
	itemCalls map[string]int

	// The event stream: off until EnableEvents.
	events    bool
	eventsEOF bool
	streams   map[*eventStream]struct{}
	// removalEvents is what streams say they tell of removals; nil when
	// they say nothing.
	removalEvents *[2]runtime.Availability
}

var (
	_ runtime.Runtime     = (*Runtime)(nil)
	_ runtime.EventSource = (*Runtime)(nil)
)

// New returns a fake runtime holding pods.
func New(pods ...Pod) *Runtime {
	return &Runtime{
		state:     NewSnapshot(pods...),
		injected:  make(map[Op][]error),
		latency:   make(map[Op]time.Duration),
		itemErr:   make(map[string]error),
		opErr:     make(map[Op]error),
		hung:      make(map[string]bool),
		calls:     make(map[Op]int),
		itemCalls: make(map[string]int),
		streams:   make(map[*eventStream]struct{}),
	}
}

// SetPods replaces the runtime's state with pods.
func (r *Runtime) SetPods(pods ...Pod) { r.Load(NewSnapshot(pods...)) }

// Load replaces the runtime's state with s. The runtime owns s from then on:
// later calls that change single items change s.
func (r *Runtime) Load(s *Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
}

// SetContainerState changes the state of one listed container, as a runtime
// would when it starts or exits. Exited containers get exitCode and a
// matching reason.
func (r *Runtime) SetContainerState(id string, state runtimeapi.ContainerState, exitCode int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.state.containerIndex(id)
	if i < 0 {
		return fmt.Errorf("fakeruntime: no container %q", id)
	}
	// List items are shared with earlier List results: replace, never mutate.
	item := cloneContainer(r.state.containers[i])
	item.State = state
	r.state.containers[i] = item
	if old := r.state.containerStatus[id]; old != nil {
		st := cloneContainerStatus(old)
		st.State = state
		st.ExitCode, st.Reason, st.FinishedAt = 0, "", 0
		if state != runtimeapi.ContainerState_CONTAINER_CREATED && st.StartedAt == 0 {
			st.StartedAt = st.CreatedAt + 1
		}
		if state == runtimeapi.ContainerState_CONTAINER_EXITED {
			st.ExitCode, st.FinishedAt, st.Reason = exitCode, st.CreatedAt+2, "Completed"
			if exitCode != 0 {
				st.Reason = "Error"
			}
		}
		r.state.containerStatus[id] = st
	}
	return nil
}

// SetSandboxState changes the state of one listed sandbox, as a runtime
// would when it stops it.
func (r *Runtime) SetSandboxState(id string, state runtimeapi.PodSandboxState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.state.sandboxes, func(s *runtimeapi.PodSandbox) bool { return s.GetId() == id })
	if i < 0 {
		return fmt.Errorf("fakeruntime: no sandbox %q", id)
	}
	// List items are shared with earlier List results: replace, never mutate.
	item := proto.Clone(r.state.sandboxes[i]).(*runtimeapi.PodSandbox)
	item.State = state
	r.state.sandboxes[i] = item
	if old := r.state.sandboxStatus[id]; old != nil {
		st := proto.Clone(old).(*runtimeapi.PodSandboxStatus)
		st.State = state
		r.state.sandboxStatus[id] = st
	}
	return nil
}

// AddContainer adds container c to pod p, labelled as p's.
func (r *Runtime) AddContainer(p Pod, c Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state.appendContainer(buildContainer(p, c))
}

// ReplaceContainer removes container oldID and lists c in its place, in
// the same pod and sandbox: a container restarted as a new attempt.
func (r *Runtime) ReplaceContainer(oldID string, c Container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.state.containerIndex(oldID)
	if i < 0 {
		return fmt.Errorf("fakeruntime: no container %q", oldID)
	}
	old := r.state.containers[i]
	labels := old.GetLabels()
	p := Pod{
		UID:       labels[runtime.PodUIDLabel],
		Name:      labels[runtime.PodNameLabel],
		Namespace: labels[runtime.PodNamespaceLabel],
	}
	if c.SandboxID == "" {
		c.SandboxID = old.GetPodSandboxId()
	}
	item, st := buildContainer(p, c)
	r.state.containers[i] = item
	delete(r.state.containerStatus, oldID)
	delete(r.state.containerAt, oldID)
	r.state.containerStatus[c.ID] = st
	r.state.containerAt[c.ID] = i
	return nil
}

// AddPod adds the sandboxes and containers of p.
func (r *Runtime) AddPod(p Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state.addPod(p)
}

// Remove deletes the sandboxes and containers with the given IDs.
func (r *Runtime) Remove(ids ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remove(ids)
}

// remove deletes the items with the given IDs. Callers hold mu.
func (r *Runtime) remove(ids []string) {
	for _, id := range ids {
		delete(r.state.sandboxStatus, id)
		delete(r.state.containerStatus, id)
	}
	// In place: List hands out copies of these slices, never the slices.
	r.state.sandboxes = slices.DeleteFunc(
		r.state.sandboxes,
		func(s *runtimeapi.PodSandbox) bool { return slices.Contains(ids, s.GetId()) },
	)
	r.state.containers = slices.DeleteFunc(
		r.state.containers,
		func(c *runtimeapi.Container) bool { return slices.Contains(ids, c.GetId()) },
	)
	r.state.containerAt = nil
}

// RemovePod deletes every sandbox and container of pod uid: those whose
// metadata or labels name it.
func (r *Runtime) RemovePod(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, s := range r.state.sandboxes {
		if s != nil && (s.GetMetadata().GetUid() == uid || s.GetLabels()[runtime.PodUIDLabel] == uid) {
			ids = append(ids, s.GetId())
		}
	}
	for _, c := range r.state.containers {
		if c != nil && c.GetLabels()[runtime.PodUIDLabel] == uid {
			ids = append(ids, c.GetId())
		}
	}
	r.remove(ids)
}

// InjectError makes the next call of op fail with err. Errors queue up: each
// call consumes one.
func (r *Runtime) InjectError(op Op, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.injected[op] = append(r.injected[op], err)
}

// SetItemError makes every status call for the sandbox or container id fail
// with err until it is cleared with a nil err.
func (r *Runtime) SetItemError(id string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.itemErr, id)
		return
	}
	r.itemErr[id] = err
}

// SetOpError makes every call of op fail with err, after the errors
// InjectError queued, until it is cleared with a nil err: a runtime that
// is down, or fails one operation for a while.
func (r *Runtime) SetOpError(op Op, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.opErr, op)
		return
	}
	r.opErr[op] = err
}

// SetHang makes status calls for id block until the caller's context ends.
func (r *Runtime) SetHang(id string, hang bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !hang {
		delete(r.hung, id)
		return
	}
	r.hung[id] = true
}

// SetLatency makes every call of op take d before it answers.
func (r *Runtime) SetLatency(op Op, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency[op] = d
}

// Calls returns how many times op was called.
func (r *Runtime) Calls(op Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[op]
}

// ItemCalls returns how many status calls were made for id.
func (r *Runtime) ItemCalls(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.itemCalls[id]
}

// ResetCalls zeroes every call counter.
func (r *Runtime) ResetCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.calls)
	clear(r.itemCalls)
}

// begin records a call and returns its scripted outcome.
func (r *Runtime) begin(op Op, id string) (state *Snapshot, latency time.Duration, hang bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[op]++
	if id != "" {
		r.itemCalls[id]++
	}
	if q := r.injected[op]; len(q) > 0 {
		err, r.injected[op] = q[0], q[1:]
	} else {
		err = r.opErr[op]
	}
	if err == nil && id != "" {
		err = r.itemErr[id]
	}
	return r.state, r.latency[op], id != "" && r.hung[id], err
}

func wait(ctx context.Context, d time.Duration, hang bool) error {
	if hang {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// serve records a call of op on item id, waits as scripted and, unless the
// call is to fail, answers from the runtime's state.
func serve[T any](ctx context.Context, r *Runtime, op Op, id string, answer func(*Snapshot) (T, error)) (T, error) {
	var zero T
	state, latency, hang, err := r.begin(op, id)
	if werr := wait(ctx, latency, hang); werr != nil {
		return zero, werr
	}
	if err != nil {
		return zero, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return answer(state)
}

// filter returns the items keep accepts, in a new slice.
func filter[T any](items []T, keep func(T) bool) []T {
	var out []T
	for _, it := range items {
		if keep(it) {
			out = append(out, it)
		}
	}
	return out
}

// ListPodSandbox implements runtime.Runtime.
func (r *Runtime) ListPodSandbox(
	ctx context.Context,
	f *runtimeapi.PodSandboxFilter,
) ([]*runtimeapi.PodSandbox, error) {
	return serve(ctx, r, runtime.OpListPodSandbox, "", func(state *Snapshot) ([]*runtimeapi.PodSandbox, error) {
		if f == nil {
			return slices.Clone(state.sandboxes), nil
		}
		return filter(state.sandboxes, func(s *runtimeapi.PodSandbox) bool {
			return (f.Id == "" || s.GetId() == f.Id) &&
				(f.State == nil || s.GetState() == f.State.State) &&
				crilist.MatchLabels(s.GetLabels(), f.LabelSelector)
		}), nil
	})
}

// ListContainers implements runtime.Runtime.
func (r *Runtime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return serve(ctx, r, runtime.OpListContainers, "", func(state *Snapshot) ([]*runtimeapi.Container, error) {
		if f == nil {
			return slices.Clone(state.containers), nil
		}
		return filter(state.containers, func(c *runtimeapi.Container) bool {
			return (f.Id == "" || c.GetId() == f.Id) &&
				(f.PodSandboxId == "" || c.GetPodSandboxId() == f.PodSandboxId) &&
				(f.State == nil || c.GetState() == f.State.State) &&
				crilist.MatchLabels(c.GetLabels(), f.LabelSelector)
		}), nil
	})
}

// PodSandboxStatus implements runtime.Runtime.
func (r *Runtime) PodSandboxStatus(
	ctx context.Context,
	id string,
	_ bool,
) (*runtimeapi.PodSandboxStatusResponse, error) {
	return serve(
		ctx,
		r,
		runtime.OpPodSandboxStatus,
		id,
		func(state *Snapshot) (*runtimeapi.PodSandboxStatusResponse, error) {
			st, ok := state.sandboxStatus[id]
			if !ok {
				return nil, status.Errorf(codes.NotFound, "an error occurred when try to find sandbox %q: not found", id)
			}
			return &runtimeapi.PodSandboxStatusResponse{Status: st}, nil
		},
	)
}

// ContainerStatus implements runtime.Runtime.
func (r *Runtime) ContainerStatus(ctx context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	return serve(
		ctx,
		r,
		runtime.OpContainerStatus,
		id,
		func(state *Snapshot) (*runtimeapi.ContainerStatusResponse, error) {
			st, ok := state.containerStatus[id]
			if !ok {
				return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: not found", id)
			}
			return &runtimeapi.ContainerStatusResponse{Status: st}, nil
		},
	)
}

func cloneContainer(c *runtimeapi.Container) *runtimeapi.Container {
	return proto.Clone(c).(*runtimeapi.Container)
}

func cloneContainerStatus(s *runtimeapi.ContainerStatus) *runtimeapi.ContainerStatus {
	return proto.Clone(s).(*runtimeapi.ContainerStatus)
}
