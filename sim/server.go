// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Version strings the simulator reports.
const (
	RuntimeName    = "pleg-sim"
	RuntimeVersion = "0.1.0"
)

// runtimeServer serves the CRI RuntimeService. gRPC runs each call in its
// own goroutine, so calls are served concurrently, as real runtimes do.
type runtimeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	s *Sim
}

// hang blocks until the caller gives up.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

// begin counts a call of o and applies its hang fault; it returns the
// faults in force for the rest of the call.
func (s *Sim) begin(ctx context.Context, o op) (*activeFaults, error) {
	s.calls[o].Add(1)
	f := s.faults.Load()
	if f.hang[o] {
		return f, hang(ctx)
	}
	return f, nil
}

// finish delays a call of o returning items items by its latency, then
// fails it at the fault's error rate. Failing after the delay keeps the
// latency of failed calls realistic.
func (s *Sim) finish(ctx context.Context, f *activeFaults, o op, items int) error {
	if err := s.lat.wait(ctx, o, items); err != nil {
		return err
	}
	if r := f.errorRate[o]; r > 0 && s.coin(r) {
		return status.Errorf(f.ErrorCode, "sim: injected %s error", o)
	}
	return nil
}

func (s *Sim) coin(p float64) bool {
	if p >= 1 {
		return true
	}
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.errRng.Float64() < p
}

// mutate runs a change under the state lock and publishes its events
// after releasing it.
func (s *Sim) mutate(change func(st *store, out *eventBuf) error) error {
	var out eventBuf
	s.st.mu.Lock()
	err := change(s.st, &out)
	s.st.mu.Unlock()
	s.publish(out)
	return err
}

func (r *runtimeServer) Version(
	ctx context.Context,
	_ *runtimeapi.VersionRequest,
) (*runtimeapi.VersionResponse, error) {
	f, err := r.s.begin(ctx, opVersion)
	if err == nil {
		err = r.s.finish(ctx, f, opVersion, 0)
	}
	if err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

func (r *runtimeServer) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	f, err := r.s.begin(ctx, opStatus)
	if err == nil {
		err = r.s.finish(ctx, f, opStatus, 0)
	}
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}
	if req.GetVerbose() {
		info, _ := json.Marshal(
			map[string]any{"simulator": true, "events": r.s.opts.Events.String(), "faults": f.String()},
		)
		resp.Info = map[string]string{"config": string(info)}
	}
	return resp, nil
}

func (r *runtimeServer) RuntimeConfig(
	ctx context.Context,
	_ *runtimeapi.RuntimeConfigRequest,
) (*runtimeapi.RuntimeConfigResponse, error) {
	f, err := r.s.begin(ctx, opRuntimeConfig)
	if err == nil {
		err = r.s.finish(ctx, f, opRuntimeConfig, 0)
	}
	if err != nil {
		return nil, err
	}
	driver, _ := parseCgroupDriver(r.s.opts.CgroupDriver) // validated by New
	return &runtimeapi.RuntimeConfigResponse{
		Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: driver},
	}, nil
}

func (r *runtimeServer) UpdateRuntimeConfig(
	ctx context.Context,
	_ *runtimeapi.UpdateRuntimeConfigRequest,
) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	f, err := r.s.begin(ctx, opUpdateRuntimeConfig)
	if err == nil {
		err = r.s.finish(ctx, f, opUpdateRuntimeConfig, 0)
	}
	if err != nil {
		return nil, err
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

func (r *runtimeServer) RunPodSandbox(
	ctx context.Context,
	req *runtimeapi.RunPodSandboxRequest,
) (*runtimeapi.RunPodSandboxResponse, error) {
	f, err := r.s.begin(ctx, opRunPodSandbox)
	if err == nil {
		err = r.s.finish(ctx, f, opRunPodSandbox, 0)
	}
	if err != nil {
		return nil, err
	}
	var id string
	err = r.s.mutate(func(st *store, out *eventBuf) error {
		sb, err := st.runSandbox(req.GetConfig(), req.GetRuntimeHandler(), CauseClient, out)
		if err == nil {
			id = sb.id
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (r *runtimeServer) StopPodSandbox(
	ctx context.Context,
	req *runtimeapi.StopPodSandboxRequest,
) (*runtimeapi.StopPodSandboxResponse, error) {
	f, err := r.s.begin(ctx, opStopPodSandbox)
	if err == nil {
		err = r.s.finish(ctx, f, opStopPodSandbox, 0)
	}
	if err != nil {
		return nil, err
	}
	err = r.s.mutate(func(st *store, out *eventBuf) error {
		sb, err := st.sandbox(req.GetPodSandboxId())
		if status.Code(err) == codes.NotFound {
			// The CRI: stopping an unknown sandbox succeeds, since the
			// kubelet retries a stop whose answer it lost.
			return nil
		}
		if err == nil {
			st.stopSandbox(sb, exitKilled, CauseClient, out)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *runtimeServer) RemovePodSandbox(
	ctx context.Context,
	req *runtimeapi.RemovePodSandboxRequest,
) (*runtimeapi.RemovePodSandboxResponse, error) {
	f, err := r.s.begin(ctx, opRemovePodSandbox)
	if err == nil {
		err = r.s.finish(ctx, f, opRemovePodSandbox, 0)
	}
	if err != nil {
		return nil, err
	}
	err = r.s.mutate(func(st *store, out *eventBuf) error {
		sb, err := st.sandbox(req.GetPodSandboxId())
		if status.Code(err) == codes.NotFound {
			return nil // removing a removed sandbox succeeds
		}
		if err == nil {
			st.removeSandbox(sb, CauseClient, out)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *runtimeServer) PodSandboxStatus(
	ctx context.Context,
	req *runtimeapi.PodSandboxStatusRequest,
) (*runtimeapi.PodSandboxStatusResponse, error) {
	f, err := r.s.begin(ctx, opPodSandboxStatus)
	if err != nil {
		return nil, err
	}
	st := r.s.st
	st.mu.RLock()
	sb, lookupErr := st.sandbox(req.GetPodSandboxId())
	var (
		resp *runtimeapi.PodSandboxStatusResponse
		uid  string
	)
	if lookupErr == nil {
		uid = sb.md.GetUid()
		resp = &runtimeapi.PodSandboxStatusResponse{Status: sb.status}
		if r.s.opts.SandboxContainerStatuses {
			resp.Timestamp = st.now()
			resp.ContainersStatuses = make([]*runtimeapi.ContainerStatus, len(sb.containers))
			for i, c := range sb.containers {
				resp.ContainersStatuses[i] = c.status
			}
		}
		if req.GetVerbose() {
			resp.Info = verboseInfo(map[string]any{"pid": pid(sb.id), "runtimeHandler": sb.handler, "image": PauseImage})
		}
	}
	st.mu.RUnlock()
	if f.HangPod != "" && uid == f.HangPod {
		return nil, hang(ctx)
	}
	if err := r.s.finish(ctx, f, opPodSandboxStatus, 0); err != nil {
		return nil, err
	}
	return resp, lookupErr
}

// listSandboxes answers ListPodSandbox and StreamPodSandboxes.
func (s *Sim) listSandboxes(
	ctx context.Context,
	filter *runtimeapi.PodSandboxFilter,
) (wireList[*runtimeapi.PodSandbox], *activeFaults, error) {
	var none wireList[*runtimeapi.PodSandbox]
	f, err := s.begin(ctx, opListPodSandbox)
	if err != nil {
		return none, nil, err
	}
	l := corruptList(s.st.listSandboxes(filter), f, func(sb *runtimeapi.PodSandbox, how corruption, pad string) {
		switch how {
		case corruptNilMetadata:
			sb.Metadata = nil
		case corruptUnknownState:
			sb.State = UnknownState
		case corruptPad:
			sb.Annotations = padded(sb.Annotations, pad)
		}
	})
	if err := s.finish(ctx, f, opListPodSandbox, len(l.items)); err != nil {
		return none, nil, err
	}
	return l, f, nil
}

func (r *runtimeServer) CreateContainer(
	ctx context.Context,
	req *runtimeapi.CreateContainerRequest,
) (*runtimeapi.CreateContainerResponse, error) {
	f, err := r.s.begin(ctx, opCreateContainer)
	if err == nil {
		err = r.s.finish(ctx, f, opCreateContainer, 0)
	}
	if err != nil {
		return nil, err
	}
	// The image store has its own lock, taken before the state's.
	imageRef := r.s.images.resolve(req.GetConfig().GetImage().GetImage())
	var id string
	err = r.s.mutate(func(st *store, out *eventBuf) error {
		sb, err := st.sandbox(req.GetPodSandboxId())
		if err != nil {
			return err
		}
		c, err := st.createContainer(sb, req.GetConfig(), imageRef, CauseClient, out)
		if err == nil {
			id = c.id
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (r *runtimeServer) StartContainer(
	ctx context.Context,
	req *runtimeapi.StartContainerRequest,
) (*runtimeapi.StartContainerResponse, error) {
	f, err := r.s.begin(ctx, opStartContainer)
	if err == nil {
		err = r.s.finish(ctx, f, opStartContainer, 0)
	}
	if err != nil {
		return nil, err
	}
	err = r.s.mutate(func(st *store, out *eventBuf) error {
		c, err := st.container(req.GetContainerId())
		if err != nil {
			return err
		}
		return st.startContainer(c, CauseClient, out)
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// ReopenContainerLog makes the running container's log file anew where
// the kubelet expects it, empty: the simulator's containers write
// nothing, but a kubelet whose container log manager finds no file asks
// for it every 10 s, per container. A container that is not running gets
// an error and no file, as the CRI allows.
func (r *runtimeServer) ReopenContainerLog(
	ctx context.Context,
	req *runtimeapi.ReopenContainerLogRequest,
) (*runtimeapi.ReopenContainerLogResponse, error) {
	f, err := r.s.begin(ctx, opReopenContainerLog)
	if err == nil {
		err = r.s.finish(ctx, f, opReopenContainerLog, 0)
	}
	if err != nil {
		return nil, err
	}
	var logPath string
	err = r.s.mutate(func(st *store, _ *eventBuf) error {
		c, err := st.container(req.GetContainerId())
		if err != nil {
			return err
		}
		if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			return status.Errorf(codes.FailedPrecondition, "container %s is not running", c.id)
		}
		logPath = c.logPath
		return nil
	})
	if err != nil {
		return nil, err
	}
	if logPath != "" {
		if err := touch(r.s.opts.LogRoot, logPath); err != nil {
			return nil, status.Errorf(codes.Internal, "reopen the log of %s: %v", req.GetContainerId(), err)
		}
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// touch creates the file at path (below root, when root is set), and its
// directory, if they do not exist.
func touch(root, path string) error {
	if root != "" {
		path = filepath.Join(root, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

func (r *runtimeServer) StopContainer(
	ctx context.Context,
	req *runtimeapi.StopContainerRequest,
) (*runtimeapi.StopContainerResponse, error) {
	f, err := r.s.begin(ctx, opStopContainer)
	if err == nil {
		err = r.s.finish(ctx, f, opStopContainer, 0)
	}
	if err != nil {
		return nil, err
	}
	code := int32(exitTerminated)
	if req.GetTimeout() <= 0 {
		code = exitKilled
	}
	err = r.s.mutate(func(st *store, out *eventBuf) error {
		c, err := st.container(req.GetContainerId())
		if status.Code(err) == codes.NotFound {
			return nil // as for sandboxes: an unknown container is stopped
		}
		if err == nil {
			st.exitContainer(c, code, CauseClient, out)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *runtimeServer) RemoveContainer(
	ctx context.Context,
	req *runtimeapi.RemoveContainerRequest,
) (*runtimeapi.RemoveContainerResponse, error) {
	f, err := r.s.begin(ctx, opRemoveContainer)
	if err == nil {
		err = r.s.finish(ctx, f, opRemoveContainer, 0)
	}
	if err != nil {
		return nil, err
	}
	err = r.s.mutate(func(st *store, out *eventBuf) error {
		c, err := st.container(req.GetContainerId())
		if status.Code(err) == codes.NotFound {
			return nil // removing a removed container succeeds
		}
		if err == nil {
			st.removeContainer(c, CauseClient, out)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtimeServer) ContainerStatus(
	ctx context.Context,
	req *runtimeapi.ContainerStatusRequest,
) (*runtimeapi.ContainerStatusResponse, error) {
	f, err := r.s.begin(ctx, opContainerStatus)
	if err != nil {
		return nil, err
	}
	st := r.s.st
	st.mu.RLock()
	c, lookupErr := st.container(req.GetContainerId())
	var (
		resp *runtimeapi.ContainerStatusResponse
		uid  string
	)
	if lookupErr == nil {
		uid = c.sb.md.GetUid()
		resp = &runtimeapi.ContainerStatusResponse{Status: c.status}
		if req.GetVerbose() {
			resp.Info = verboseInfo(
				map[string]any{"sandboxID": c.sb.id, "pid": pid(c.id), "runtimeType": "io.containerd.runc.v2"},
			)
		}
	}
	st.mu.RUnlock()
	if f.HangPod != "" && uid == f.HangPod {
		return nil, hang(ctx)
	}
	if uid != "" {
		if err := sleep(ctx, r.s.clock, f.SlowPod[uid]); err != nil {
			return nil, err
		}
	}
	if err := r.s.finish(ctx, f, opContainerStatus, 0); err != nil {
		return nil, err
	}
	return resp, lookupErr
}

// listContainers answers ListContainers and StreamContainers.
func (s *Sim) listContainers(
	ctx context.Context,
	filter *runtimeapi.ContainerFilter,
) (wireList[*runtimeapi.Container], *activeFaults, error) {
	var none wireList[*runtimeapi.Container]
	f, err := s.begin(ctx, opListContainers)
	if err != nil {
		return none, nil, err
	}
	l := corruptList(s.st.listContainers(filter), f, func(c *runtimeapi.Container, how corruption, pad string) {
		switch how {
		case corruptNilMetadata:
			c.Metadata = nil
		case corruptUnknownState:
			c.State = UnknownState
		case corruptPad:
			c.Annotations = padded(c.Annotations, pad)
		}
	})
	if err := s.finish(ctx, f, opListContainers, len(l.items)); err != nil {
		return none, nil, err
	}
	return l, f, nil
}

// GetContainerEvents streams events with the semantics of Options.Events.
func (r *runtimeServer) GetContainerEvents(
	_ *runtimeapi.GetEventsRequest,
	stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse],
) error {
	s := r.s
	ctx := stream.Context()
	f, err := s.begin(ctx, opGetContainerEvents)
	if err != nil {
		return err
	}
	if f.EventsUnimplemented {
		// What gRPC itself answers for a method the server lacks.
		return status.Error(codes.Unimplemented, "unknown method GetContainerEvents for service runtime.v1.RuntimeService")
	}
	if err := s.finish(ctx, f, opGetContainerEvents, 0); err != nil {
		return err
	}
	q := s.queue.Load()
	if q == nil {
		return status.Error(codes.Unavailable, "sim: runtime is restarting")
	}
	events, cancel, ok := q.subscribe(ctx)
	if !ok {
		return nil // CRI-O with events off: the stream ends at once
	}
	defer cancel()
	s.events.subscribers.Add(1)
	defer s.events.subscribers.Add(-1)

	// The drop fault ends the stream StreamDropEvery after it opened;
	// SetFaults may change or clear it meanwhile.
	opened := s.clock.Now()
	var (
		dropC     <-chan time.Time
		dropTimer clock.Timer
	)
	arm := func() {
		if dropTimer != nil {
			dropTimer.Stop()
			dropTimer, dropC = nil, nil
		}
		if every := f.StreamDropEvery; every > 0 {
			t := s.clock.NewTimer(max(0, every-s.clock.Since(opened)))
			dropTimer, dropC = t, t.C()
		}
	}
	arm()
	defer func() {
		if dropTimer != nil {
			dropTimer.Stop()
		}
	}()
	for {
		select {
		case ev := <-events:
			if err := stream.Send(ev); err != nil {
				return err
			}
			s.events.sent.Add(1)
		case <-ctx.Done():
			return nil
		case <-q.stop:
			return status.Error(codes.Unavailable, "sim: runtime is stopping or restarting")
		case <-dropC:
			return status.Errorf(codes.Unavailable, "sim: event stream dropped after %v (fault)", f.StreamDropEvery)
		case <-f.changed:
			f = s.faults.Load()
			arm()
		}
	}
}

// verboseInfo is the Info map of a verbose status, shaped like
// containerd's: one "info" key holding JSON.
func verboseInfo(v map[string]any) map[string]string {
	b, _ := json.Marshal(v)
	return map[string]string{"info": string(b)}
}

// pid makes up a stable process ID for an item.
func pid(id string) int {
	n := 0
	for i := 0; i < 6 && i < len(id); i++ {
		n = n*16 + int(hexDigit(id[i]))
	}
	return 1000 + n%4_000_000
}

func hexDigit(b byte) byte {
	switch {
	case b >= '0' && b <= '9':
		return b - '0'
	case b >= 'a' && b <= 'f':
		return b - 'a' + 10
	}
	return 0
}
