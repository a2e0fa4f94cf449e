// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/internal/crilist"
	"github.com/plegkit/pleg/runtime"
)

// The state of the simulated runtime.
//
// Every list item and status handed out is immutable: a change builds new
// ones and replaces the old, so lists and status calls share them without
// copying and without holding the lock while gRPC encodes them. The full
// lists are kept ready between changes, since an unfiltered list is what a
// relist asks for every second.

type sandbox struct {
	id          string
	md          *runtimeapi.PodSandboxMetadata
	labels      map[string]string
	annotations map[string]string
	handler     string
	createdAt   int64
	ip          string
	nsOptions   *runtimeapi.NamespaceOption
	state       runtimeapi.PodSandboxState

	item   *runtimeapi.PodSandbox
	enc    []byte // item's encoding in a list answer
	status *runtimeapi.PodSandboxStatus

	// containers are the sandbox's containers in creation order.
	containers []*container
	labelUID   string // the pod UID label, for label-selector lookups
	nameKey    string // its reserved name

	// For the workload.
	createdTick uint64
	startedTick uint64 // when a container of the sandbox last started
	removing    bool   // replacement scheduled
	removed     bool
}

// refresh replaces the item and status after a change.
func (sb *sandbox) refresh() {
	sb.item = &runtimeapi.PodSandbox{
		Id:             sb.id,
		Metadata:       sb.md,
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Labels:         sb.labels,
		Annotations:    sb.annotations,
		RuntimeHandler: sb.handler,
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:             sb.id,
		Metadata:       sb.md,
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Labels:         sb.labels,
		Annotations:    sb.annotations,
		RuntimeHandler: sb.handler,
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: sb.nsOptions}},
	}
	// Like containerd, a sandbox that is not ready has no network.
	if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY && sb.ip != "" {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: sb.ip}
	}
	sb.status = st
	sb.enc = encodeItem(sb.item)
}

func (sb *sandbox) change(op ChangeOp, cause Cause) Change {
	return Change{
		Op: op, Cause: cause,
		PodUID: sb.md.GetUid(), PodName: sb.md.GetName(), PodNamespace: sb.md.GetNamespace(),
		SandboxID: sb.id, Attempt: sb.md.GetAttempt(),
	}
}

type container struct {
	id          string
	sb          *sandbox
	md          *runtimeapi.ContainerMetadata
	image       *runtimeapi.ImageSpec
	imageRef    string
	mounts      []*runtimeapi.Mount
	labels      map[string]string
	annotations map[string]string
	logPath     string
	createdAt   int64
	startedAt   int64
	finishedAt  int64
	state       runtimeapi.ContainerState
	exitCode    int32
	reason      string

	item   *runtimeapi.Container
	enc    []byte // item's encoding in a list answer
	status *runtimeapi.ContainerStatus

	labelUID string
	nameKey  string

	// For the workload.
	startedTick uint64
	short       bool
	removed     bool
}

func (c *container) refresh() {
	c.item = &runtimeapi.Container{
		Id:           c.id,
		PodSandboxId: c.sb.id,
		Metadata:     c.md,
		Image:        c.image,
		ImageRef:     c.imageRef,
		State:        c.state,
		CreatedAt:    c.createdAt,
		Labels:       c.labels,
		Annotations:  c.annotations,
		ImageId:      c.imageRef,
	}
	c.status = &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.md,
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       c.image,
		ImageRef:    c.imageRef,
		ImageId:     c.imageRef,
		Reason:      c.reason,
		Labels:      c.labels,
		Annotations: c.annotations,
		LogPath:     c.logPath,
		Mounts:      c.mounts,
	}
	c.enc = encodeItem(c.item)
}

func (c *container) change(op ChangeOp, cause Cause) Change {
	ch := c.sb.change(op, cause)
	ch.ContainerID = c.id
	ch.ContainerName = c.md.GetName()
	ch.Attempt = c.md.GetAttempt()
	return ch
}

// uidIndex holds the sandboxes and containers labelled with one pod UID,
// in creation order, so that a relist of one pod does not scan the node.
type uidIndex struct {
	sandboxes  []*sandbox
	containers []*container
}

// eventBuf collects the events of changes made under the lock, to be
// published after it is released: publishing may wait for a slow
// subscriber, and lists must go on meanwhile.
type eventBuf []*runtimeapi.ContainerEventResponse

type store struct {
	mu       sync.RWMutex
	seed     uint64
	clock    clock.PassiveClock
	eventsOn bool
	// podRemovalEvents tells removeSandbox to send DELETED events, for
	// the sandbox and the containers removed with it, as containerd does;
	// CRI-O sends none.
	podRemovalEvents bool

	counter uint64 // for IDs
	ipN     uint64

	sandboxes  map[string]*sandbox
	containers map[string]*container
	// Creation order, with removed entries left until compaction.
	sbOrder  []*sandbox
	ctrOrder []*container
	sbDead   int
	ctrDead  int
	byUID    map[string]*uidIndex
	names    map[string]string

	// The ready full lists and their encodings; valid while the flags are
	// set.
	sbList    wireList[*runtimeapi.PodSandbox]
	sbListOK  bool
	ctrList   wireList[*runtimeapi.Container]
	ctrListOK bool

	tick    uint64
	history history
}

func newStore(seed uint64, clk clock.PassiveClock, events EventMode, historyLimit int) *store {
	return &store{
		seed:             seed,
		clock:            clk,
		eventsOn:         events != EventsOff,
		podRemovalEvents: events == EventsContainerd,
		sandboxes:        make(map[string]*sandbox),
		containers:       make(map[string]*container),
		byUID:            make(map[string]*uidIndex),
		names:            make(map[string]string),
		history:          history{limit: historyLimit},
	}
}

// hash returns 32 bytes derived from the seed, a purpose and the counter.
func (st *store) hash(purpose string) [32]byte {
	st.counter++
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], st.seed)
	binary.LittleEndian.PutUint64(b[8:], st.counter)
	return sha256.Sum256(append(b[:], purpose...))
}

// newID returns a 64-hex-digit ID like containerd's.
func (st *store) newID() string {
	h := st.hash("id")
	return hex.EncodeToString(h[:])
}

// newUID returns a pod UID shaped like a Kubernetes one (a version 4 UUID).
func (st *store) newUID() string {
	h := st.hash("uid")
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	s := hex.EncodeToString(h[:16])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

func (st *store) now() int64 { return st.clock.Now().UnixNano() }

func (st *store) record(c Change) {
	c.Tick = st.tick
	st.history.add(c)
}

// event adds an event about id, of sandbox sb, to out: the sandbox's
// status (none once it is removed) and the status of each of its
// containers, as containerd sends.
func (st *store) event(out *eventBuf, sb *sandbox, id string, typ runtimeapi.ContainerEventType) {
	if out == nil || !st.eventsOn {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ}
	if !sb.removed {
		ev.PodSandboxStatus = sb.status
	}
	ev.ContainersStatuses = make([]*runtimeapi.ContainerStatus, len(sb.containers))
	for i, c := range sb.containers {
		ev.ContainersStatuses[i] = c.status
	}
	*out = append(*out, ev)
}

func (st *store) index(uid string) *uidIndex {
	ix := st.byUID[uid]
	if ix == nil {
		ix = &uidIndex{}
		st.byUID[uid] = ix
	}
	return ix
}

func (st *store) unindex(uid string, sb *sandbox, c *container) {
	ix := st.byUID[uid]
	if ix == nil {
		return
	}
	if sb != nil {
		ix.sandboxes = slices.DeleteFunc(ix.sandboxes, func(x *sandbox) bool { return x == sb })
	}
	if c != nil {
		ix.containers = slices.DeleteFunc(ix.containers, func(x *container) bool { return x == c })
	}
	if len(ix.sandboxes) == 0 && len(ix.containers) == 0 {
		delete(st.byUID, uid)
	}
}

// runSandbox creates a ready sandbox. out nil means no events: the initial
// pods were running before the simulator started.
func (st *store) runSandbox(
	cfg *runtimeapi.PodSandboxConfig,
	handler string,
	cause Cause,
	out *eventBuf,
) (*sandbox, error) {
	md := cfg.GetMetadata()
	if md == nil {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must include metadata")
	}
	nameKey := "sandbox/" + strings.Join(
		[]string{md.Name, md.Namespace, md.Uid, strconv.FormatUint(uint64(md.Attempt), 10)},
		"_",
	)
	if id, ok := st.names[nameKey]; ok {
		return nil, status.Errorf(
			codes.AlreadyExists,
			"failed to reserve sandbox name %q: name is reserved for %q",
			nameKey[len("sandbox/"):],
			id,
		)
	}
	st.ipN++
	sb := &sandbox{
		id:          st.newID(),
		md:          md,
		labels:      cfg.GetLabels(),
		annotations: cfg.GetAnnotations(),
		handler:     handler,
		createdAt:   st.now(),
		ip:          fmt.Sprintf("10.%d.%d.%d", byte(st.ipN>>16), byte(st.ipN>>8), byte(st.ipN)),
		nsOptions:   cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(),
		state:       runtimeapi.PodSandboxState_SANDBOX_READY,
		labelUID:    cfg.GetLabels()[runtime.PodUIDLabel],
		nameKey:     nameKey,
		createdTick: st.tick,
	}
	sb.refresh()
	st.names[nameKey] = sb.id
	st.sandboxes[sb.id] = sb
	st.sbOrder = append(st.sbOrder, sb)
	st.sbListOK = false
	if sb.labelUID != "" {
		ix := st.index(sb.labelUID)
		ix.sandboxes = append(ix.sandboxes, sb)
	}
	st.record(sb.change(ChangeRunPod, cause))
	st.event(out, sb, sb.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	st.event(out, sb, sb.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return sb, nil
}

// stopSandbox kills the sandbox's running containers with exitCode and
// makes it not ready. Stopping a stopped sandbox does nothing.
func (st *store) stopSandbox(sb *sandbox, exitCode int32, cause Cause, out *eventBuf) {
	for _, c := range sb.containers {
		st.exitContainer(c, exitCode, cause, out)
	}
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return
	}
	sb.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	sb.refresh()
	st.sbListOK = false
	st.record(sb.change(ChangeStopPod, cause))
	st.event(out, sb, sb.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// removeSandbox stops the sandbox, removes its containers, then the
// sandbox. As in containerd, its DELETED event is sent before it leaves
// the store, so it still carries the sandbox's status. As in CRI-O
// (without podRemovalEvents), the removals send nothing: the stop's
// events are the last.
func (st *store) removeSandbox(sb *sandbox, cause Cause, out *eventBuf) {
	st.stopSandbox(sb, exitKilled, cause, out)
	if !st.podRemovalEvents {
		out = nil
	}
	for len(sb.containers) > 0 {
		st.removeContainer(sb.containers[0], cause, out)
	}
	st.event(out, sb, sb.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	sb.removed = true
	delete(st.sandboxes, sb.id)
	delete(st.names, sb.nameKey)
	if sb.labelUID != "" {
		st.unindex(sb.labelUID, sb, nil)
	}
	st.sbDead++
	st.sbListOK = false
	st.compact()
	st.record(sb.change(ChangeRemovePod, cause))
}

// Exit codes of containers stopped by the runtime.
const (
	exitTerminated = 143 // SIGTERM: StopContainer with a grace period
	exitKilled     = 137 // SIGKILL: no grace period, or the sandbox stops
)

func exitReason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

func (st *store) createContainer(
	sb *sandbox,
	cfg *runtimeapi.ContainerConfig,
	imageRef string,
	cause Cause,
	out *eventBuf,
) (*container, error) {
	md := cfg.GetMetadata()
	if md == nil {
		return nil, status.Error(codes.InvalidArgument, "container config must include metadata")
	}
	if sc := cfg.GetLinux().GetSecurityContext(); sc.GetRunAsGroup() != nil && sc.GetRunAsUser() == nil &&
		sc.GetRunAsUsername() == "" {
		// A group alone names no user to run as: runtimes refuse it.
		return nil, status.Error(codes.InvalidArgument, "run_as_group is set without run_as_user or run_as_username")
	}
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready", sb.id)
	}
	nameKey := "container/" + sb.id + "/" + md.Name + "/" + strconv.FormatUint(uint64(md.Attempt), 10)
	if id, ok := st.names[nameKey]; ok {
		return nil, status.Errorf(
			codes.AlreadyExists,
			"failed to reserve container name %s attempt %d in sandbox %s: name is reserved for %q",
			md.Name,
			md.Attempt,
			sb.id,
			id,
		)
	}
	image := cfg.GetImage()
	if image == nil {
		image = &runtimeapi.ImageSpec{}
	}
	c := &container{
		id:          st.newID(),
		sb:          sb,
		md:          md,
		image:       image,
		imageRef:    imageRef,
		mounts:      cfg.GetMounts(),
		labels:      cfg.GetLabels(),
		annotations: cfg.GetAnnotations(),
		createdAt:   st.now(),
		state:       runtimeapi.ContainerState_CONTAINER_CREATED,
		labelUID:    cfg.GetLabels()[runtime.PodUIDLabel],
		nameKey:     nameKey,
	}
	if cfg.GetLogPath() != "" {
		podDir := sb.md.GetNamespace() + "_" + sb.md.GetName() + "_" + sb.md.GetUid()
		c.logPath = "/var/log/pods/" + podDir + "/" + cfg.GetLogPath()
	}
	c.refresh()
	st.names[nameKey] = c.id
	st.containers[c.id] = c
	st.ctrOrder = append(st.ctrOrder, c)
	sb.containers = append(sb.containers, c)
	st.ctrListOK = false
	if c.labelUID != "" {
		ix := st.index(c.labelUID)
		ix.containers = append(ix.containers, c)
	}
	st.record(c.change(ChangeCreateContainer, cause))
	st.event(out, sb, c.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return c, nil
}

func (st *store) startContainer(c *container, cause Cause, out *eventBuf) error {
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return status.Errorf(codes.FailedPrecondition, "container %s is in %s state", c.id, c.state)
	}
	if c.sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return status.Errorf(codes.FailedPrecondition, "sandbox %s of container %s is not ready", c.sb.id, c.id)
	}
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = st.now()
	c.startedTick = st.tick
	c.sb.startedTick = st.tick
	c.refresh()
	st.ctrListOK = false
	st.record(c.change(ChangeStartContainer, cause))
	st.event(out, c.sb, c.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return nil
}

// exitContainer ends a running container with code; a container that is
// not running is left as it is, as containerd does on StopContainer.
func (st *store) exitContainer(c *container, code int32, cause Cause, out *eventBuf) {
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = st.now()
	c.exitCode = code
	c.reason = exitReason(code)
	c.refresh()
	st.ctrListOK = false
	ch := c.change(ChangeExitContainer, cause)
	ch.ExitCode, ch.Reason = c.exitCode, c.reason
	st.record(ch)
	st.event(out, c.sb, c.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// removeContainer kills the container if it runs, then removes it. As in
// containerd, its DELETED event is sent after the removal, so the
// container is absent from the event's container statuses.
func (st *store) removeContainer(c *container, cause Cause, out *eventBuf) {
	st.exitContainer(c, exitKilled, cause, out)
	c.removed = true
	delete(st.containers, c.id)
	delete(st.names, c.nameKey)
	c.sb.containers = slices.DeleteFunc(c.sb.containers, func(x *container) bool { return x == c })
	if c.labelUID != "" {
		st.unindex(c.labelUID, nil, c)
	}
	st.ctrDead++
	st.ctrListOK = false
	st.compact()
	st.record(c.change(ChangeRemoveContainer, cause))
	st.event(out, c.sb, c.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
}

// compact drops removed entries from the creation orders once they are
// half of them, so that churn without lists does not grow them forever.
func (st *store) compact() {
	if st.ctrDead > 64 && st.ctrDead > len(st.ctrOrder)/2 {
		st.ctrOrder = slices.DeleteFunc(st.ctrOrder, func(c *container) bool { return c.removed })
		st.ctrDead = 0
	}
	if st.sbDead > 64 && st.sbDead > len(st.sbOrder)/2 {
		st.sbOrder = slices.DeleteFunc(st.sbOrder, func(sb *sandbox) bool { return sb.removed })
		st.sbDead = 0
	}
}

// resolve finds an item by ID or, like containerd, by a unique prefix of
// one.
func resolve[T any](m map[string]*T, id, kind string) (*T, error) {
	if v, ok := m[id]; ok {
		return v, nil
	}
	if id == "" || len(id) >= 64 {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
	}
	var found *T
	for k, v := range m {
		if strings.HasPrefix(k, id) {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "%s ID prefix %q is ambiguous", kind, id)
			}
			found = v
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
	}
	return found, nil
}

func (st *store) sandbox(id string) (*sandbox, error) {
	return resolve(st.sandboxes, id, "sandbox")
}

func (st *store) container(id string) (*container, error) {
	return resolve(st.containers, id, "container")
}

// allSandboxes returns the ready list of every sandbox, building it if a
// change made it stale. It is shared: never modify it.
func (st *store) allSandboxes() wireList[*runtimeapi.PodSandbox] {
	return cachedList(&st.mu, &st.sbListOK, &st.sbList, func() wireList[*runtimeapi.PodSandbox] {
		items := make([]*runtimeapi.PodSandbox, 0, len(st.sandboxes))
		encs := make([][]byte, 0, len(st.sandboxes))
		for _, sb := range st.sbOrder {
			if !sb.removed {
				items, encs = append(items, sb.item), append(encs, sb.enc)
			}
		}
		return buildWire(items, encs)
	})
}

// allContainers is allSandboxes for containers.
func (st *store) allContainers() wireList[*runtimeapi.Container] {
	return cachedList(&st.mu, &st.ctrListOK, &st.ctrList, func() wireList[*runtimeapi.Container] {
		items := make([]*runtimeapi.Container, 0, len(st.containers))
		encs := make([][]byte, 0, len(st.containers))
		for _, c := range st.ctrOrder {
			if !c.removed {
				items, encs = append(items, c.item), append(encs, c.enc)
			}
		}
		return buildWire(items, encs)
	})
}

// cachedList returns *l if *ok says it is current, else builds it under
// the write lock; lists are read far more often than the store changes.
func cachedList[T any](mu *sync.RWMutex, ok *bool, l *T, build func() T) T {
	mu.RLock()
	if *ok {
		v := *l
		mu.RUnlock()
		return v
	}
	mu.RUnlock()
	mu.Lock()
	defer mu.Unlock()
	if !*ok {
		*l, *ok = build(), true
	}
	return *l
}

// listSandboxes answers ListPodSandbox: the ready list when there is no
// filter, else a new one, in creation order either way.
func (st *store) listSandboxes(f *runtimeapi.PodSandboxFilter) wireList[*runtimeapi.PodSandbox] {
	if f.GetId() == "" && f.GetState() == nil && len(f.GetLabelSelector()) == 0 {
		return st.allSandboxes()
	}
	match := func(sb *sandbox) bool {
		return !sb.removed &&
			(f.GetState() == nil || sb.state == f.GetState().GetState()) &&
			crilist.MatchLabels(sb.labels, f.GetLabelSelector())
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var candidates []*sandbox
	switch {
	case f.GetId() != "":
		if sb, err := st.sandbox(f.GetId()); err == nil {
			candidates = []*sandbox{sb}
		}
	case f.GetLabelSelector()[runtime.PodUIDLabel] != "":
		if ix := st.byUID[f.GetLabelSelector()[runtime.PodUIDLabel]]; ix != nil {
			candidates = ix.sandboxes
		}
	default:
		candidates = st.sbOrder
	}
	var (
		items []*runtimeapi.PodSandbox
		encs  [][]byte
	)
	for _, sb := range candidates {
		if match(sb) {
			items, encs = append(items, sb.item), append(encs, sb.enc)
		}
	}
	return buildWire(items, encs)
}

// listContainers answers ListContainers like listSandboxes.
func (st *store) listContainers(f *runtimeapi.ContainerFilter) wireList[*runtimeapi.Container] {
	if f.GetId() == "" && f.GetState() == nil && f.GetPodSandboxId() == "" && len(f.GetLabelSelector()) == 0 {
		return st.allContainers()
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var sb *sandbox
	if f.GetPodSandboxId() != "" {
		var err error
		if sb, err = st.sandbox(f.GetPodSandboxId()); err != nil {
			return wireList[*runtimeapi.Container]{}
		}
	}
	match := func(c *container) bool {
		return !c.removed &&
			(sb == nil || c.sb == sb) &&
			(f.GetState() == nil || c.state == f.GetState().GetState()) &&
			crilist.MatchLabels(c.labels, f.GetLabelSelector())
	}
	var candidates []*container
	switch {
	case f.GetId() != "":
		if c, err := st.container(f.GetId()); err == nil {
			candidates = []*container{c}
		}
	case sb != nil:
		candidates = sb.containers
	case f.GetLabelSelector()[runtime.PodUIDLabel] != "":
		if ix := st.byUID[f.GetLabelSelector()[runtime.PodUIDLabel]]; ix != nil {
			candidates = ix.containers
		}
	default:
		candidates = st.ctrOrder
	}
	var (
		items []*runtimeapi.Container
		encs  [][]byte
	)
	for _, c := range candidates {
		if match(c) {
			items, encs = append(items, c.item), append(encs, c.enc)
		}
	}
	return buildWire(items, encs)
}
