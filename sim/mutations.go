// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// The mutations: every change the CRI calls and the workload make to the
// store, under its lock. Each builds new list items and statuses for what
// it changed (refresh), records the change in the history and adds the
// events the runtime would send.

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
