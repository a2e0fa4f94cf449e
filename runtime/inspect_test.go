// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var (
	errBoom  = errors.New("boom")
	errCause = errors.New("per-pod deadline")
)

// answer scripts the runtime's reply to one status call. If do is set, it
// runs first and its error, if any, is the reply's error.
type answer struct {
	sandbox   *runtimeapi.PodSandboxStatusResponse
	container *runtimeapi.ContainerStatusResponse
	err       error
	do        func(ctx context.Context) error
}

// fakeRuntime answers status calls from maps; an ID it does not hold is
// NotFound, as the Runtime contract asks. It records every call.
type fakeRuntime struct {
	sandboxes  map[string]answer
	containers map[string]answer

	mu    sync.Mutex
	calls []string
}

func (f *fakeRuntime) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.record("ListPodSandbox")
	return nil, errors.New("unexpected list")
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.record("ListContainers")
	return nil, errors.New("unexpected list")
}

func (f *fakeRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	f.record("sandbox:" + id)
	if verbose {
		return nil, errors.New("unexpected verbose call")
	}
	a, ok := f.sandboxes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "sandbox %q not found", id)
	}
	if a.do != nil {
		if err := a.do(ctx); err != nil {
			return nil, err
		}
	}
	return a.sandbox, a.err
}

func (f *fakeRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.record("container:" + id)
	if verbose {
		return nil, errors.New("unexpected verbose call")
	}
	a, ok := f.containers[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", id)
	}
	if a.do != nil {
		if err := a.do(ctx); err != nil {
			return nil, err
		}
	}
	return a.container, a.err
}

var _ Runtime = (*fakeRuntime)(nil)

func sb(id string, created int64) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, CreatedAt: created}
}

func ctr(id string, created int64) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, CreatedAt: created}
}

func sbOK(id string, state runtimeapi.PodSandboxState, created int64, ips ...string) answer {
	s := &runtimeapi.PodSandboxStatus{Id: id, State: state, CreatedAt: created}
	if len(ips) > 0 {
		s.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: ips[0]}
		for _, ip := range ips[1:] {
			s.Network.AdditionalIps = append(s.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	return answer{sandbox: &runtimeapi.PodSandboxStatusResponse{Status: s}}
}

func cOK(id string, created int64) answer {
	return answer{container: &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
		Id: id, CreatedAt: created, Metadata: &runtimeapi.ContainerMetadata{Name: "n-" + id},
	}}}
}

const (
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

func sandboxIDs(s *PodStatus) []string {
	var ids []string
	for _, x := range s.Sandboxes {
		ids = append(ids, x.GetId())
	}
	return ids
}

func containerIDs(s *PodStatus) []string {
	var ids []string
	for _, x := range s.Containers {
		ids = append(ids, x.GetId())
	}
	return ids
}

func TestInspectPod(t *testing.T) {
	notFound := status.Error(codes.NotFound, "gone")
	tests := []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		sbAnswers  map[string]answer
		cAnswers   map[string]answer

		wantSandboxes  []string
		wantContainers []string
		wantIPs        []string
		wantErr        error      // errors.Is
		wantCode       codes.Code // status.Code, if not OK
		wantErrHas     string     // substring of the error
		wantCalls      []string
	}{
		{
			name: "empty pod",
		},
		{
			name:       "every listed item, sandboxes and containers newest first",
			sandboxes:  []*runtimeapi.PodSandbox{sb("old", 1), sb("new", 2)},
			containers: []*runtimeapi.Container{ctr("c1", 5), ctr("c2", 9), ctr("c3", 7)},
			sbAnswers: map[string]answer{
				"old": sbOK("old", notReady, 1),
				"new": sbOK("new", ready, 2, "10.0.0.1", "fd00::1"),
			},
			cAnswers:       map[string]answer{"c1": cOK("c1", 5), "c2": cOK("c2", 9), "c3": cOK("c3", 7)},
			wantSandboxes:  []string{"new", "old"},
			wantContainers: []string{"c2", "c3", "c1"},
			wantIPs:        []string{"10.0.0.1", "fd00::1"},
			wantCalls:      []string{"sandbox:new", "sandbox:old", "container:c1", "container:c2", "container:c3"},
		},
		{
			name:      "IPs only from the newest sandbox, even if an older one is ready",
			sandboxes: []*runtimeapi.PodSandbox{sb("old", 1), sb("new", 2)},
			sbAnswers: map[string]answer{
				"old": sbOK("old", ready, 1, "10.0.0.1"),
				"new": sbOK("new", ready, 2, "10.0.0.2"),
			},
			wantSandboxes: []string{"new", "old"},
			wantIPs:       []string{"10.0.0.2"},
			wantCalls:     []string{"sandbox:new", "sandbox:old"},
		},
		{
			name:      "newest sandbox not ready gives no IPs",
			sandboxes: []*runtimeapi.PodSandbox{sb("old", 1), sb("new", 2)},
			sbAnswers: map[string]answer{
				"old": sbOK("old", ready, 1, "10.0.0.1"),
				"new": sbOK("new", notReady, 2, "10.0.0.2"),
			},
			wantSandboxes: []string{"new", "old"},
			wantCalls:     []string{"sandbox:new", "sandbox:old"},
		},
		{
			name:          "ready sandbox without network",
			sandboxes:     []*runtimeapi.PodSandbox{sb("s", 1)},
			sbAnswers:     map[string]answer{"s": sbOK("s", ready, 1)},
			wantSandboxes: []string{"s"},
			wantCalls:     []string{"sandbox:s"},
		},
		{
			name:          "invalid IPs skipped",
			sandboxes:     []*runtimeapi.PodSandbox{sb("s", 1)},
			sbAnswers:     map[string]answer{"s": sbOK("s", ready, 1, "not-an-ip", "10.0.0.2", "", "300.1.1.1", "fd00::2")},
			wantSandboxes: []string{"s"},
			wantIPs:       []string{"10.0.0.2", "fd00::2"},
			wantCalls:     []string{"sandbox:s"},
		},
		{
			name:      "newest sandbox gone: IPs from the newest found",
			sandboxes: []*runtimeapi.PodSandbox{sb("old", 1), sb("new", 2)},
			sbAnswers: map[string]answer{
				"old": sbOK("old", ready, 1, "10.0.0.1"),
			},
			wantSandboxes: []string{"old"},
			wantIPs:       []string{"10.0.0.1"},
			wantCalls:     []string{"sandbox:new", "sandbox:old"},
		},
		{
			name:      "sandboxes created at the same time ordered by ID",
			sandboxes: []*runtimeapi.PodSandbox{sb("b", 5), sb("a", 5), sb("c", 6)},
			sbAnswers: map[string]answer{
				"a": sbOK("a", ready, 5, "10.0.0.1"),
				"b": sbOK("b", ready, 5, "10.0.0.2"),
				"c": sbOK("c", notReady, 6),
			},
			wantSandboxes: []string{"c", "a", "b"},
			wantCalls:     []string{"sandbox:c", "sandbox:a", "sandbox:b"},
		},
		{
			name:           "container NotFound skipped",
			sandboxes:      []*runtimeapi.PodSandbox{sb("s", 1)},
			containers:     []*runtimeapi.Container{ctr("c1", 1), ctr("gone", 2), ctr("c3", 3)},
			sbAnswers:      map[string]answer{"s": sbOK("s", ready, 1)},
			cAnswers:       map[string]answer{"c1": cOK("c1", 1), "c3": cOK("c3", 3)},
			wantSandboxes:  []string{"s"},
			wantContainers: []string{"c3", "c1"},
			wantCalls:      []string{"sandbox:s", "container:c1", "container:gone", "container:c3"},
		},
		{
			name:           "wrapped NotFound skipped",
			sandboxes:      []*runtimeapi.PodSandbox{sb("s", 1)},
			containers:     []*runtimeapi.Container{ctr("c1", 1)},
			sbAnswers:      map[string]answer{"s": {err: fmt.Errorf("remote: %w", notFound)}},
			cAnswers:       map[string]answer{"c1": {err: fmt.Errorf("remote: %w", notFound)}},
			wantContainers: nil,
			wantCalls:      []string{"sandbox:s", "container:c1"},
		},
		{
			name:       "sandbox error stops the inspection",
			sandboxes:  []*runtimeapi.PodSandbox{sb("old", 1), sb("new", 2), sb("older", 0)},
			containers: []*runtimeapi.Container{ctr("c1", 1)},
			sbAnswers: map[string]answer{
				"new":   sbOK("new", ready, 2, "10.0.0.1"),
				"old":   {err: errBoom},
				"older": sbOK("older", notReady, 0),
			},
			cAnswers:      map[string]answer{"c1": cOK("c1", 1)},
			wantSandboxes: []string{"new"},
			wantIPs:       []string{"10.0.0.1"},
			wantErr:       errBoom,
			wantErrHas:    "sandbox old",
			wantCalls:     []string{"sandbox:new", "sandbox:old"},
		},
		{
			name:       "gRPC error other than NotFound stops the inspection",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s", 1)},
			containers: []*runtimeapi.Container{ctr("c1", 1)},
			sbAnswers:  map[string]answer{"s": {err: status.Error(codes.Unavailable, "runtime down")}},
			wantCode:   codes.Unavailable,
			wantErrHas: "sandbox s",
			wantCalls:  []string{"sandbox:s"},
		},
		{
			name:       "container error stops the inspection, partial status sorted",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s", 1)},
			containers: []*runtimeapi.Container{ctr("c1", 1), ctr("c2", 3), ctr("bad", 2), ctr("c4", 4)},
			sbAnswers:  map[string]answer{"s": sbOK("s", ready, 1)},
			cAnswers: map[string]answer{
				"c1": cOK("c1", 1), "c2": cOK("c2", 3), "bad": {err: errBoom}, "c4": cOK("c4", 4),
			},
			wantSandboxes:  []string{"s"},
			wantContainers: []string{"c2", "c1"},
			wantErr:        errBoom,
			wantErrHas:     "container bad",
			wantCalls:      []string{"sandbox:s", "container:c1", "container:c2", "container:bad"},
		},
		{
			name:       "nil sandbox status",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s", 1)},
			sbAnswers:  map[string]answer{"s": {sandbox: &runtimeapi.PodSandboxStatusResponse{}}},
			wantErr:    ErrNilStatus,
			wantErrHas: "sandbox s",
			wantCalls:  []string{"sandbox:s"},
		},
		{
			name:       "nil sandbox response",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s", 1)},
			sbAnswers:  map[string]answer{"s": {}},
			wantErr:    ErrNilStatus,
			wantErrHas: "sandbox s",
			wantCalls:  []string{"sandbox:s"},
		},
		{
			name:          "nil container status",
			sandboxes:     []*runtimeapi.PodSandbox{sb("s", 1)},
			containers:    []*runtimeapi.Container{ctr("c1", 1), ctr("c2", 2)},
			sbAnswers:     map[string]answer{"s": sbOK("s", ready, 1)},
			cAnswers:      map[string]answer{"c1": {container: &runtimeapi.ContainerStatusResponse{}}, "c2": cOK("c2", 2)},
			wantSandboxes: []string{"s"},
			wantErr:       ErrNilStatus,
			wantErrHas:    "container c1",
			wantCalls:     []string{"sandbox:s", "container:c1"},
		},
		{
			name:       "nil container response",
			containers: []*runtimeapi.Container{ctr("c1", 1)},
			cAnswers:   map[string]answer{"c1": {}},
			wantErr:    ErrNilStatus,
			wantErrHas: "container c1",
			wantCalls:  []string{"container:c1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &fakeRuntime{sandboxes: tt.sbAnswers, containers: tt.cAnswers}
			pod := &Pod{UID: "uid-1", Name: "web", Namespace: "ns", Sandboxes: tt.sandboxes, Containers: tt.containers}
			listed := slices.Clone(tt.sandboxes)

			got, err := InspectPod(context.Background(), rt, pod)

			if got == nil {
				t.Fatalf("InspectPod returned a nil status (err %v)", err)
			}
			if got.UID != "uid-1" || got.Name != "web" || got.Namespace != "ns" {
				t.Errorf("identity = %q %q %q, want uid-1 web ns", got.UID, got.Name, got.Namespace)
			}
			wantOK := tt.wantErr == nil && tt.wantCode == codes.OK
			switch {
			case wantOK && err != nil:
				t.Errorf("err = %v, want nil", err)
			case !wantOK && err == nil:
				t.Errorf("err = nil, want an error")
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			case tt.wantCode != codes.OK && status.Code(err) != tt.wantCode:
				t.Errorf("err code = %v, want %v (err %v)", status.Code(err), tt.wantCode, err)
			}
			if err != nil && !strings.Contains(err.Error(), tt.wantErrHas) {
				t.Errorf("err = %q, want it to name %q", err, tt.wantErrHas)
			}
			if ids := sandboxIDs(got); !slices.Equal(ids, tt.wantSandboxes) {
				t.Errorf("sandboxes = %v, want %v", ids, tt.wantSandboxes)
			}
			if ids := containerIDs(got); !slices.Equal(ids, tt.wantContainers) {
				t.Errorf("containers = %v, want %v", ids, tt.wantContainers)
			}
			if !slices.Equal(got.IPs, tt.wantIPs) {
				t.Errorf("IPs = %v, want %v", got.IPs, tt.wantIPs)
			}
			if !slices.Equal(rt.calls, tt.wantCalls) {
				t.Errorf("calls = %v, want %v", rt.calls, tt.wantCalls)
			}
			// The statuses are the runtime's own.
			for _, s := range got.Sandboxes {
				if s != tt.sbAnswers[s.GetId()].sandbox.GetStatus() {
					t.Errorf("sandbox %s status is not the runtime's", s.GetId())
				}
			}
			for _, c := range got.Containers {
				if c != tt.cAnswers[c.GetId()].container.GetStatus() {
					t.Errorf("container %s status is not the runtime's", c.GetId())
				}
			}
			// The listed pod is shared and must not be reordered.
			if !slices.Equal(pod.Sandboxes, listed) {
				t.Errorf("InspectPod reordered pod.Sandboxes")
			}
		})
	}
}

func TestInspectPodContext(t *testing.T) {
	// A hook ends the inspection's context while a call is in flight, the
	// way a deadline firing does, and then replies either as a gRPC client
	// would (a Canceled status) or successfully.
	type hook func(cancel context.CancelCauseFunc) func(ctx context.Context) error
	cancelAndFail := func(cause error) hook {
		return func(cancel context.CancelCauseFunc) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				cancel(cause)
				return status.FromContextError(ctx.Err()).Err()
			}
		}
	}
	cancelAndSucceed := func(cause error) hook {
		return func(cancel context.CancelCauseFunc) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				cancel(cause)
				return nil
			}
		}
	}
	tests := []struct {
		name           string
		cancelFirst    error // cancel with this cause before InspectPod
		preCancel      bool
		sandboxHook    hook
		containerHook  hook
		lastHook       hook
		wantErr        error
		wantCode       codes.Code
		wantSandboxes  []string
		wantContainers []string
		wantCalls      []string
	}{
		{
			name:      "cancelled before start with a cause",
			preCancel: true, cancelFirst: errCause,
			wantErr:   errCause,
			wantCalls: nil,
		},
		{
			name:      "cancelled before start without a cause",
			preCancel: true,
			wantErr:   context.Canceled,
			wantCalls: nil,
		},
		{
			name:        "cancelled during a sandbox call that fails",
			sandboxHook: cancelAndFail(errCause),
			wantErr:     errCause,
			wantCode:    codes.Canceled,
			wantCalls:   []string{"sandbox:s1"},
		},
		{
			name:          "cancelled during a sandbox call that succeeds",
			sandboxHook:   cancelAndSucceed(errCause),
			wantErr:       errCause,
			wantSandboxes: []string{"s1"},
			wantCalls:     []string{"sandbox:s1"},
		},
		{
			name:          "cancelled during a container call that fails",
			containerHook: cancelAndFail(errCause),
			wantErr:       errCause,
			wantCode:      codes.Canceled,
			wantSandboxes: []string{"s2", "s1"},
			wantCalls:     []string{"sandbox:s2", "sandbox:s1", "container:c1"},
		},
		{
			name:          "cancelled without a cause during a container call",
			containerHook: cancelAndFail(nil),
			wantErr:       context.Canceled,
			wantCode:      codes.Canceled,
			wantSandboxes: []string{"s2", "s1"},
			wantCalls:     []string{"sandbox:s2", "sandbox:s1", "container:c1"},
		},
		{
			name:           "cancelled during the last call, which succeeds",
			lastHook:       cancelAndSucceed(errCause),
			wantSandboxes:  []string{"s2", "s1"},
			wantContainers: []string{"c2", "c1"},
			wantCalls:      []string{"sandbox:s2", "sandbox:s1", "container:c1", "container:c2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tt.preCancel {
				cancel(tt.cancelFirst)
			}
			sb1 := sbOK("s1", ready, 2)
			if tt.sandboxHook != nil {
				sb1.do = tt.sandboxHook(cancel)
			}
			c1 := cOK("c1", 1)
			if tt.containerHook != nil {
				c1.do = tt.containerHook(cancel)
			}
			c2 := cOK("c2", 2)
			if tt.lastHook != nil {
				c2.do = tt.lastHook(cancel)
			}
			rt := &fakeRuntime{
				sandboxes:  map[string]answer{"s1": sb1, "s2": sbOK("s2", ready, 3)},
				containers: map[string]answer{"c1": c1, "c2": c2},
			}
			pod := &Pod{UID: "u", Sandboxes: []*runtimeapi.PodSandbox{sb("s1", 2), sb("s2", 3)}, Containers: []*runtimeapi.Container{ctr("c1", 1), ctr("c2", 2)}}
			if tt.sandboxHook != nil {
				// Make s1 the first sandbox asked for.
				pod.Sandboxes = []*runtimeapi.PodSandbox{sb("s1", 2)}
			}
			got, err := InspectPod(ctx, rt, pod)
			if got == nil {
				t.Fatalf("nil status")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantCode != codes.OK && status.Code(err) != tt.wantCode {
				t.Errorf("err code = %v, want %v: the runtime's error is kept", status.Code(err), tt.wantCode)
			}
			if ids := sandboxIDs(got); !slices.Equal(ids, tt.wantSandboxes) {
				t.Errorf("sandboxes = %v, want %v", ids, tt.wantSandboxes)
			}
			if ids := containerIDs(got); !slices.Equal(ids, tt.wantContainers) {
				t.Errorf("containers = %v, want %v", ids, tt.wantContainers)
			}
			if !slices.Equal(rt.calls, tt.wantCalls) {
				t.Errorf("calls = %v, want %v", rt.calls, tt.wantCalls)
			}
		})
	}
}

// A runtime call that hangs until the caller's deadline ends with the
// deadline's cause, as the generator's per-pod inspection timeout uses it.
func TestInspectPodDeadlineCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := func(ctx context.Context) error {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
		rt := &fakeRuntime{
			sandboxes:  map[string]answer{"s": sbOK("s", ready, 1, "10.0.0.1")},
			containers: map[string]answer{"c1": cOK("c1", 2), "c2": {do: hang}, "c3": cOK("c3", 3)},
		}
		pod := &Pod{
			UID:        "u",
			Sandboxes:  []*runtimeapi.PodSandbox{sb("s", 1)},
			Containers: []*runtimeapi.Container{ctr("c1", 2), ctr("c2", 1), ctr("c3", 3)},
		}
		ctx, cancel := context.WithTimeoutCause(t.Context(), 2*time.Second, errCause)
		defer cancel()
		start := time.Now()
		got, err := InspectPod(ctx, rt, pod)
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("returned after %v, want the 2s deadline", d)
		}
		if !errors.Is(err, errCause) {
			t.Errorf("err = %v, want the cause %v", err, errCause)
		}
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("err code = %v, want DeadlineExceeded", status.Code(err))
		}
		if !strings.Contains(fmt.Sprint(err), "container c2") {
			t.Errorf("err = %v, want it to name container c2", err)
		}
		if ids := containerIDs(got); !slices.Equal(ids, []string{"c1"}) {
			t.Errorf("partial containers = %v, want [c1]", ids)
		}
		if !slices.Equal(got.IPs, []string{"10.0.0.1"}) {
			t.Errorf("partial IPs = %v", got.IPs)
		}
	})
}

// Inspections of one pod run in parallel share the listed items and the
// runtime's statuses; nothing may write to them.
func TestInspectPodConcurrent(t *testing.T) {
	rt := &fakeRuntime{
		sandboxes:  map[string]answer{"a": sbOK("a", notReady, 1), "b": sbOK("b", ready, 2, "10.0.0.1")},
		containers: map[string]answer{"c1": cOK("c1", 1), "c2": cOK("c2", 2)},
	}
	pod := &Pod{
		UID:        "u",
		Sandboxes:  []*runtimeapi.PodSandbox{sb("a", 1), sb("b", 2)},
		Containers: []*runtimeapi.Container{ctr("c1", 1), ctr("c2", 2)},
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			got, err := InspectPod(context.Background(), rt, pod)
			if err != nil || !slices.Equal(sandboxIDs(got), []string{"b", "a"}) || !slices.Equal(containerIDs(got), []string{"c2", "c1"}) {
				t.Errorf("got %v %v, %v", sandboxIDs(got), containerIDs(got), err)
			}
		})
	}
	wg.Wait()
}

func TestFindContainer(t *testing.T) {
	mk := func(id, name string) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}}
	}
	newest, older, other := mk("3", "app"), mk("1", "app"), mk("2", "sidecar")
	s := &PodStatus{Containers: []*runtimeapi.ContainerStatus{newest, other, older}}
	tests := []struct {
		name   string
		s      *PodStatus
		byName string
		byID   string
		want   *runtimeapi.ContainerStatus
		wantID *runtimeapi.ContainerStatus
	}{
		{"newest of a name", s, "app", "1", newest, older},
		{"other", s, "sidecar", "2", other, other},
		{"missing", s, "db", "9", nil, nil},
		{"nil status", nil, "app", "1", nil, nil},
		{"no containers", &PodStatus{}, "app", "1", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.FindContainer(tt.byName); got != tt.want {
				t.Errorf("FindContainer(%q) = %v, want %v", tt.byName, got, tt.want)
			}
			if got := tt.s.FindContainerByID(tt.byID); got != tt.wantID {
				t.Errorf("FindContainerByID(%q) = %v, want %v", tt.byID, got, tt.wantID)
			}
		})
	}
}

func TestFiltersForPod(t *testing.T) {
	sf := PodSandboxFilterForPod("u1")
	if sf.GetId() != "" || sf.GetState() != nil || len(sf.GetLabelSelector()) != 1 || sf.GetLabelSelector()[PodUIDLabel] != "u1" {
		t.Errorf("PodSandboxFilterForPod = %v", sf)
	}
	cf := ContainerFilterForPod("u1")
	if cf.GetId() != "" || cf.GetState() != nil || cf.GetPodSandboxId() != "" || len(cf.GetLabelSelector()) != 1 || cf.GetLabelSelector()[PodUIDLabel] != "u1" {
		t.Errorf("ContainerFilterForPod = %v", cf)
	}
	// Each call returns its own filter: a caller may change it.
	PodSandboxFilterForPod("u1").LabelSelector["x"] = "y"
	if _, ok := PodSandboxFilterForPod("u1").GetLabelSelector()["x"]; ok {
		t.Errorf("filters share their label selector")
	}
}

// TestInspectPodCarriedStatuses: a sandbox status answer that carries its
// containers' statuses and a timestamp spares the per-container calls.
func TestInspectPodCarriedStatuses(t *testing.T) {
	carrying := func(ts int64, ids ...string) answer {
		a := sbOK("s", ready, 1)
		a.sandbox.Timestamp = ts
		for _, id := range ids {
			a.sandbox.ContainersStatuses = append(a.sandbox.ContainersStatuses, &runtimeapi.ContainerStatus{
				Id: id, CreatedAt: map[string]int64{"c1": 5, "c2": 6}[id], State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 3, Metadata: &runtimeapi.ContainerMetadata{Name: "carried-" + id},
			})
		}
		return a
	}
	for _, tc := range []struct {
		name      string
		sandbox   answer
		wantCalls []string
		carried   []string // containers whose status came with the sandbox's
	}{
		{"timestamp and statuses: no container calls", carrying(42, "c1", "c2"), []string{"sandbox:s"}, []string{"c1", "c2"}},
		{"a timestamp alone, as containerd 2.0.0 to 2.0.2: the pod is not empty", carrying(42), []string{"sandbox:s", "container:c1", "container:c2"}, nil},
		{"statuses without a timestamp: the kubelet requires both", carrying(0, "c1", "c2"), []string{"sandbox:s", "container:c1", "container:c2"}, nil},
		{"a container created after the answer is asked for", carrying(42, "c1"), []string{"sandbox:s", "container:c2"}, []string{"c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{
				sandboxes:  map[string]answer{"s": tc.sandbox},
				containers: map[string]answer{"c1": cOK("c1", 5), "c2": cOK("c2", 6)},
			}
			pod := &Pod{UID: "u", Sandboxes: []*runtimeapi.PodSandbox{sb("s", 1)}, Containers: []*runtimeapi.Container{ctr("c1", 5), ctr("c2", 6)}}
			status, err := InspectPod(t.Context(), rt, pod)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rt.calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", rt.calls, tc.wantCalls)
			}
			if got := containerIDs(status); !slices.Equal(got, []string{"c2", "c1"}) {
				t.Errorf("containers %v, want c2 then c1", got)
			}
			for _, id := range tc.carried {
				if c := status.FindContainerByID(id); c.GetMetadata().GetName() != "carried-"+id {
					t.Errorf("status of %s: %v, want the one the sandbox answer carried", id, c)
				}
			}
		})
	}
}

func TestNewPodStatus(t *testing.T) {
	s := NewPodStatus("u", "web", "shop",
		[]*runtimeapi.PodSandboxStatus{sbOK("old", ready, 1, "10.0.0.1").sandbox.Status, sbOK("new", ready, 2, "10.0.0.2").sandbox.Status},
		[]*runtimeapi.ContainerStatus{cOK("a", 1).container.Status, cOK("b", 3).container.Status, cOK("c", 2).container.Status})
	if got := sandboxIDs(s); !slices.Equal(got, []string{"new", "old"}) {
		t.Errorf("sandboxes %v, want newest first", got)
	}
	if got := containerIDs(s); !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Errorf("containers %v, want newest first", got)
	}
	if !slices.Equal(s.IPs, []string{"10.0.0.2"}) || s.UID != "u" || s.Name != "web" || s.Namespace != "shop" {
		t.Errorf("status %+v", s)
	}
}
