// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

const (
	sbReady    = runtimeapi.PodSandboxState_SANDBOX_READY
	sbNotReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	cCreated   = runtimeapi.ContainerState_CONTAINER_CREATED
	cRunning   = runtimeapi.ContainerState_CONTAINER_RUNNING
	cExited    = runtimeapi.ContainerState_CONTAINER_EXITED
	cUnknown   = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

var (
	errA = errors.New("error A")
	errB = errors.New("error B")
	errC = errors.New("error C")
)

func webPod() Pod {
	return Pod{
		UID: "u1", Name: "web", Namespace: "ns", IPs: []string{"10.0.0.1", "fd00::1", "10.0.0.9"},
		Sandboxes: []Sandbox{
			{ID: "s1", State: sbReady, CreatedAt: 100},
			{ID: "s0", State: sbNotReady, CreatedAt: 50},
		},
		Containers: []Container{
			{ID: "c-run", Name: "app", State: cRunning, Attempt: 2, CreatedAt: 110, Image: "img:1"},
			{ID: "c-created", Name: "init", State: cCreated, CreatedAt: 120},
			{ID: "c-ok", Name: "job", State: cExited, CreatedAt: 130},
			{ID: "c-err", Name: "job2", State: cExited, ExitCode: 3, CreatedAt: 140},
			{ID: "c-oom", Name: "big", State: cExited, ExitCode: 137, Reason: "OOMKilled", CreatedAt: 150, SandboxID: "s0"},
		},
	}
}

func dbPod() Pod {
	return Pod{
		UID: "u2", Name: "db", Namespace: "other",
		Sandboxes:  []Sandbox{{ID: "s2", State: sbReady, CreatedAt: 200}},
		Containers: []Container{{ID: "c2", Name: "db", State: cUnknown, CreatedAt: 210}},
	}
}

func sandboxIDs(items []*runtimeapi.PodSandbox) []string {
	ids := []string{}
	for _, s := range items {
		ids = append(ids, s.GetId())
	}
	return ids
}

func containerIDs(items []*runtimeapi.Container) []string {
	ids := []string{}
	for _, c := range items {
		ids = append(ids, c.GetId())
	}
	return ids
}

func listSandboxes(t *testing.T, r *Runtime, f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	t.Helper()
	items, err := r.ListPodSandbox(context.Background(), f)
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	return items
}

func listContainers(t *testing.T, r *Runtime, f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	t.Helper()
	items, err := r.ListContainers(context.Background(), f)
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	return items
}

func containerStatus(t *testing.T, r *Runtime, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := r.ContainerStatus(context.Background(), id, false)
	if err != nil {
		t.Fatalf("ContainerStatus(%s): %v", id, err)
	}
	return resp.GetStatus()
}

func TestContainerStatusFromSpec(t *testing.T) {
	tests := []struct {
		id, name, sandbox     string
		state                 runtimeapi.ContainerState
		attempt               uint32
		created               int64
		startedAt, finishedAt int64
		exitCode              int32
		reason, image         string
		pod                   Pod
	}{
		{id: "c-run", name: "app", sandbox: "s1", state: cRunning, attempt: 2, created: 110, startedAt: 111, image: "img:1", pod: webPod()},
		{id: "c-created", name: "init", sandbox: "s1", state: cCreated, created: 120, pod: webPod()},
		{id: "c-ok", name: "job", sandbox: "s1", state: cExited, created: 130, startedAt: 131, finishedAt: 132, reason: "Completed", pod: webPod()},
		{id: "c-err", name: "job2", sandbox: "s1", state: cExited, created: 140, startedAt: 141, finishedAt: 142, exitCode: 3, reason: "Error", pod: webPod()},
		{id: "c-oom", name: "big", sandbox: "s0", state: cExited, created: 150, startedAt: 151, finishedAt: 152, exitCode: 137, reason: "OOMKilled", pod: webPod()},
		{id: "c2", name: "db", sandbox: "s2", state: cUnknown, created: 210, startedAt: 211, pod: dbPod()},
	}
	r := New(webPod(), dbPod())
	items := listContainers(t, r, nil)
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			s := containerStatus(t, r, tt.id)
			if s.GetId() != tt.id || s.GetState() != tt.state || s.GetCreatedAt() != tt.created {
				t.Errorf("status id/state/created = %s/%v/%d", s.GetId(), s.GetState(), s.GetCreatedAt())
			}
			if s.GetStartedAt() != tt.startedAt || s.GetFinishedAt() != tt.finishedAt {
				t.Errorf("started/finished = %d/%d, want %d/%d", s.GetStartedAt(), s.GetFinishedAt(), tt.startedAt, tt.finishedAt)
			}
			if s.GetExitCode() != tt.exitCode || s.GetReason() != tt.reason {
				t.Errorf("exit code/reason = %d/%q, want %d/%q", s.GetExitCode(), s.GetReason(), tt.exitCode, tt.reason)
			}
			if s.GetMetadata().GetName() != tt.name || s.GetMetadata().GetAttempt() != tt.attempt {
				t.Errorf("metadata = %v", s.GetMetadata())
			}
			if s.GetImage().GetImage() != tt.image || s.GetImageRef() != tt.image {
				t.Errorf("image = %v / %q, want %q", s.GetImage(), s.GetImageRef(), tt.image)
			}
			wantLabels := map[string]string{
				runtime.PodUIDLabel:        tt.pod.UID,
				runtime.PodNameLabel:       tt.pod.Name,
				runtime.PodNamespaceLabel:  tt.pod.Namespace,
				runtime.ContainerNameLabel: tt.name,
			}
			wantAnn := map[string]string{runtime.ContainerRestartCountAnnotation: strconv.Itoa(int(tt.attempt))}
			checkMap(t, "status labels", s.GetLabels(), wantLabels)
			checkMap(t, "status annotations", s.GetAnnotations(), wantAnn)

			i := slices.IndexFunc(items, func(c *runtimeapi.Container) bool { return c.GetId() == tt.id })
			if i < 0 {
				t.Fatalf("container %s not listed", tt.id)
			}
			item := items[i]
			if item.GetPodSandboxId() != tt.sandbox || item.GetState() != tt.state || item.GetCreatedAt() != tt.created {
				t.Errorf("item sandbox/state/created = %s/%v/%d", item.GetPodSandboxId(), item.GetState(), item.GetCreatedAt())
			}
			if item.GetMetadata().GetName() != tt.name || item.GetMetadata().GetAttempt() != tt.attempt {
				t.Errorf("item metadata = %v", item.GetMetadata())
			}
			if item.GetImage().GetImage() != tt.image || item.GetImageRef() != tt.image {
				t.Errorf("item image = %v / %q", item.GetImage(), item.GetImageRef())
			}
			checkMap(t, "item labels", item.GetLabels(), wantLabels)
			checkMap(t, "item annotations", item.GetAnnotations(), wantAnn)
		})
	}
}

func checkMap(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s[%s] = %q, want %q", what, k, got[k], v)
		}
	}
}

func TestContainerWithoutSandbox(t *testing.T) {
	p := Pod{UID: "u", Containers: []Container{{ID: "c", Name: "x", State: cRunning}}}
	r := New(p)
	items := listContainers(t, r, nil)
	if len(items) != 1 || items[0].GetPodSandboxId() != "" {
		t.Fatalf("items = %v, want one container without sandbox", items)
	}
}

func TestSandboxStatusFromSpec(t *testing.T) {
	tests := []struct {
		id      string
		pod     Pod
		state   runtimeapi.PodSandboxState
		created int64
		ip      string
		extra   []string
	}{
		{id: "s1", pod: webPod(), state: sbReady, created: 100, ip: "10.0.0.1", extra: []string{"fd00::1", "10.0.0.9"}},
		{id: "s0", pod: webPod(), state: sbNotReady, created: 50},
		{id: "s2", pod: dbPod(), state: sbReady, created: 200},
	}
	r := New(webPod(), dbPod())
	items := listSandboxes(t, r, nil)
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			resp, err := r.PodSandboxStatus(context.Background(), tt.id, false)
			if err != nil {
				t.Fatalf("PodSandboxStatus: %v", err)
			}
			s := resp.GetStatus()
			if s.GetId() != tt.id || s.GetState() != tt.state || s.GetCreatedAt() != tt.created {
				t.Errorf("status = %v", s)
			}
			md := s.GetMetadata()
			if md.GetUid() != tt.pod.UID || md.GetName() != tt.pod.Name || md.GetNamespace() != tt.pod.Namespace {
				t.Errorf("metadata = %v", md)
			}
			wantLabels := map[string]string{
				runtime.PodUIDLabel:       tt.pod.UID,
				runtime.PodNameLabel:      tt.pod.Name,
				runtime.PodNamespaceLabel: tt.pod.Namespace,
			}
			checkMap(t, "status labels", s.GetLabels(), wantLabels)
			if tt.ip == "" {
				if s.GetNetwork() != nil {
					t.Errorf("network = %v, want none", s.GetNetwork())
				}
			} else {
				var extra []string
				for _, ip := range s.GetNetwork().GetAdditionalIps() {
					extra = append(extra, ip.GetIp())
				}
				if s.GetNetwork().GetIp() != tt.ip || !slices.Equal(extra, tt.extra) {
					t.Errorf("network = %v, want %s + %v", s.GetNetwork(), tt.ip, tt.extra)
				}
			}
			i := slices.IndexFunc(items, func(x *runtimeapi.PodSandbox) bool { return x.GetId() == tt.id })
			if i < 0 {
				t.Fatalf("sandbox %s not listed", tt.id)
			}
			item := items[i]
			if item.GetState() != tt.state || item.GetCreatedAt() != tt.created || item.GetMetadata().GetUid() != tt.pod.UID {
				t.Errorf("item = %v", item)
			}
			checkMap(t, "item labels", item.GetLabels(), wantLabels)
		})
	}
}

func TestListPodSandboxFilter(t *testing.T) {
	state := func(s runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStateValue {
		return &runtimeapi.PodSandboxStateValue{State: s}
	}
	tests := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"nil", nil, []string{"s1", "s0", "s2"}},
		{"empty", &runtimeapi.PodSandboxFilter{}, []string{"s1", "s0", "s2"}},
		{"id", &runtimeapi.PodSandboxFilter{Id: "s0"}, []string{"s0"}},
		{"unknown id", &runtimeapi.PodSandboxFilter{Id: "nope"}, []string{}},
		{"ready", &runtimeapi.PodSandboxFilter{State: state(sbReady)}, []string{"s1", "s2"}},
		{"not ready", &runtimeapi.PodSandboxFilter{State: state(sbNotReady)}, []string{"s0"}},
		{"pod uid", runtime.PodSandboxFilterForPod("u1"), []string{"s1", "s0"}},
		{"pod uid and state", &runtimeapi.PodSandboxFilter{State: state(sbNotReady), LabelSelector: map[string]string{runtime.PodUIDLabel: "u2"}}, []string{}},
		{"two labels", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runtime.PodUIDLabel: "u2", runtime.PodNamespaceLabel: "other"}}, []string{"s2"}},
		{"unknown label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"x": "y"}}, []string{}},
		{"id and other pod", &runtimeapi.PodSandboxFilter{Id: "s1", LabelSelector: map[string]string{runtime.PodUIDLabel: "u2"}}, []string{}},
	}
	r := New(webPod(), dbPod())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sandboxIDs(listSandboxes(t, r, tt.filter)); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestListContainersFilter(t *testing.T) {
	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	all := []string{"c-run", "c-created", "c-ok", "c-err", "c-oom", "c2"}
	tests := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"nil", nil, all},
		{"empty", &runtimeapi.ContainerFilter{}, all},
		{"id", &runtimeapi.ContainerFilter{Id: "c-ok"}, []string{"c-ok"}},
		{"unknown id", &runtimeapi.ContainerFilter{Id: "nope"}, []string{}},
		{"running", &runtimeapi.ContainerFilter{State: state(cRunning)}, []string{"c-run"}},
		{"exited", &runtimeapi.ContainerFilter{State: state(cExited)}, []string{"c-ok", "c-err", "c-oom"}},
		{"unknown state", &runtimeapi.ContainerFilter{State: state(cUnknown)}, []string{"c2"}},
		{"sandbox s0", &runtimeapi.ContainerFilter{PodSandboxId: "s0"}, []string{"c-oom"}},
		{"sandbox s1", &runtimeapi.ContainerFilter{PodSandboxId: "s1"}, []string{"c-run", "c-created", "c-ok", "c-err"}},
		{"pod uid", runtime.ContainerFilterForPod("u1"), []string{"c-run", "c-created", "c-ok", "c-err", "c-oom"}},
		{"container name", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{runtime.ContainerNameLabel: "job"}}, []string{"c-ok"}},
		{"sandbox and state", &runtimeapi.ContainerFilter{PodSandboxId: "s1", State: state(cExited)}, []string{"c-ok", "c-err"}},
		{"pod and wrong sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "s2", LabelSelector: map[string]string{runtime.PodUIDLabel: "u1"}}, []string{}},
	}
	r := New(webPod(), dbPod())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := containerIDs(listContainers(t, r, tt.filter)); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// A list result belongs to the caller: changing the slice does not change
// the runtime.
func TestListResultIsACopy(t *testing.T) {
	r := New(webPod())
	for _, f := range []*runtimeapi.PodSandboxFilter{nil, {}} {
		items := listSandboxes(t, r, f)
		items[0] = nil
		if got := listSandboxes(t, r, nil); got[0] == nil {
			t.Fatalf("changing a ListPodSandbox result (filter %v) changed the runtime", f)
		}
	}
	for _, f := range []*runtimeapi.ContainerFilter{nil, {}} {
		items := listContainers(t, r, f)
		items[0] = nil
		if got := listContainers(t, r, nil); got[0] == nil {
			t.Fatalf("changing a ListContainers result (filter %v) changed the runtime", f)
		}
	}
}

func TestSetContainerState(t *testing.T) {
	tests := []struct {
		name     string
		id       string
		state    runtimeapi.ContainerState
		exitCode int32

		wantExit     int32
		wantReason   string
		wantStarted  int64
		wantFinished int64
	}{
		{name: "running exits cleanly", id: "c-run", state: cExited, wantReason: "Completed", wantStarted: 111, wantFinished: 112},
		{name: "running exits with an error", id: "c-run", state: cExited, exitCode: 137, wantExit: 137, wantReason: "Error", wantStarted: 111, wantFinished: 112},
		{name: "created starts", id: "c-created", state: cRunning, wantStarted: 121},
		{name: "created exits", id: "c-created", state: cExited, exitCode: 1, wantExit: 1, wantReason: "Error", wantStarted: 121, wantFinished: 122},
		{name: "exited restarts in place", id: "c-oom", state: cRunning, exitCode: 9, wantStarted: 151},
		{name: "exited with custom reason exits again", id: "c-oom", state: cExited, wantReason: "Completed", wantStarted: 151, wantFinished: 152},
		{name: "running becomes unknown", id: "c-run", state: cUnknown, wantStarted: 111},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(webPod())
			before := listContainers(t, r, nil)
			i := slices.IndexFunc(before, func(c *runtimeapi.Container) bool { return c.GetId() == tt.id })
			oldItem := before[i]
			oldItemState := oldItem.GetState()
			oldStatus := containerStatus(t, r, tt.id)
			oldSnapshot := fmt.Sprint(oldStatus.GetState(), oldStatus.GetExitCode(), oldStatus.GetReason(), oldStatus.GetStartedAt(), oldStatus.GetFinishedAt())

			if err := r.SetContainerState(tt.id, tt.state, tt.exitCode); err != nil {
				t.Fatalf("SetContainerState: %v", err)
			}

			// Earlier results are untouched: items are replaced.
			if oldItem.GetState() != oldItemState {
				t.Errorf("an earlier list item was mutated: state %v", oldItem.GetState())
			}
			if got := fmt.Sprint(oldStatus.GetState(), oldStatus.GetExitCode(), oldStatus.GetReason(), oldStatus.GetStartedAt(), oldStatus.GetFinishedAt()); got != oldSnapshot {
				t.Errorf("an earlier status was mutated: %s, was %s", got, oldSnapshot)
			}
			if before[i] != oldItem {
				t.Errorf("an earlier list slice was changed")
			}

			after := listContainers(t, r, nil)
			if !slices.Equal(containerIDs(after), containerIDs(before)) {
				t.Errorf("list order changed: %v", containerIDs(after))
			}
			item := after[i]
			if item == oldItem {
				t.Errorf("the list item was not replaced")
			}
			if item.GetState() != tt.state || item.GetId() != tt.id || item.GetMetadata().GetName() != oldItem.GetMetadata().GetName() {
				t.Errorf("new item = %v", item)
			}
			s := containerStatus(t, r, tt.id)
			if s.GetState() != tt.state || s.GetExitCode() != tt.wantExit || s.GetReason() != tt.wantReason ||
				s.GetStartedAt() != tt.wantStarted || s.GetFinishedAt() != tt.wantFinished {
				t.Errorf("status state/exit/reason/started/finished = %v/%d/%q/%d/%d, want %v/%d/%q/%d/%d",
					s.GetState(), s.GetExitCode(), s.GetReason(), s.GetStartedAt(), s.GetFinishedAt(),
					tt.state, tt.wantExit, tt.wantReason, tt.wantStarted, tt.wantFinished)
			}
			byState := listContainers(t, r, &runtimeapi.ContainerFilter{Id: tt.id, State: &runtimeapi.ContainerStateValue{State: tt.state}})
			if len(byState) != 1 {
				t.Errorf("state filter does not see the new state")
			}
		})
	}
	t.Run("unknown container", func(t *testing.T) {
		r := New(webPod())
		if err := r.SetContainerState("nope", cExited, 0); err == nil {
			t.Fatalf("SetContainerState of an unknown container succeeded")
		}
		if err := r.SetContainerState("s1", cExited, 0); err == nil {
			t.Fatalf("SetContainerState of a sandbox succeeded")
		}
	})
}

func TestAddContainerAddPod(t *testing.T) {
	r := New(webPod())
	p := webPod()
	r.AddContainer(p, Container{ID: "c-new", Name: "late", State: cRunning, CreatedAt: 300})
	r.AddPod(dbPod())
	if got := containerIDs(listContainers(t, r, runtime.ContainerFilterForPod("u1"))); !slices.Contains(got, "c-new") {
		t.Fatalf("added container not listed for its pod: %v", got)
	}
	if s := containerStatus(t, r, "c-new"); s.GetLabels()[runtime.PodUIDLabel] != "u1" || s.GetStartedAt() != 301 {
		t.Fatalf("added container status = %v", s)
	}
	if got := sandboxIDs(listSandboxes(t, r, nil)); !slices.Equal(got, []string{"s1", "s0", "s2"}) {
		t.Fatalf("sandboxes after AddPod = %v", got)
	}
	if got := containerIDs(listContainers(t, r, runtime.ContainerFilterForPod("u2"))); !slices.Equal(got, []string{"c2"}) {
		t.Fatalf("containers of the added pod = %v", got)
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name          string
		remove        func(r *Runtime)
		wantSandboxes []string
		wantContainer []string
		gone          []string
	}{
		{
			name:          "some items",
			remove:        func(r *Runtime) { r.Remove("c-run", "s0", "nope") },
			wantSandboxes: []string{"s1", "s2"},
			wantContainer: []string{"c-created", "c-ok", "c-err", "c-oom", "c2"},
			gone:          []string{"c-run", "s0"},
		},
		{
			name:          "nothing",
			remove:        func(r *Runtime) { r.Remove() },
			wantSandboxes: []string{"s1", "s0", "s2"},
			wantContainer: []string{"c-run", "c-created", "c-ok", "c-err", "c-oom", "c2"},
		},
		{
			name:          "pod",
			remove:        func(r *Runtime) { r.RemovePod("u1") },
			wantSandboxes: []string{"s2"},
			wantContainer: []string{"c2"},
			gone:          []string{"s1", "s0", "c-run", "c-created", "c-ok", "c-err", "c-oom"},
		},
		{
			name:          "unknown pod",
			remove:        func(r *Runtime) { r.RemovePod("nope") },
			wantSandboxes: []string{"s1", "s0", "s2"},
			wantContainer: []string{"c-run", "c-created", "c-ok", "c-err", "c-oom", "c2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(webPod(), dbPod())
			beforeS := listSandboxes(t, r, nil)
			beforeC := listContainers(t, r, nil)
			tt.remove(r)
			if got := sandboxIDs(listSandboxes(t, r, nil)); !slices.Equal(got, tt.wantSandboxes) {
				t.Errorf("sandboxes = %v, want %v", got, tt.wantSandboxes)
			}
			if got := containerIDs(listContainers(t, r, nil)); !slices.Equal(got, tt.wantContainer) {
				t.Errorf("containers = %v, want %v", got, tt.wantContainer)
			}
			if len(beforeS) != 3 || len(beforeC) != 6 || slices.Contains(beforeS, nil) || slices.Contains(beforeC, nil) {
				t.Errorf("an earlier list result was changed")
			}
			for _, id := range tt.gone {
				_, err1 := r.PodSandboxStatus(context.Background(), id, false)
				_, err2 := r.ContainerStatus(context.Background(), id, false)
				if status.Code(err1) != codes.NotFound || status.Code(err2) != codes.NotFound {
					t.Errorf("status of removed %s: %v / %v, want NotFound", id, err1, err2)
				}
			}
			for _, id := range tt.wantSandboxes {
				if _, err := r.PodSandboxStatus(context.Background(), id, false); err != nil {
					t.Errorf("status of kept sandbox %s: %v", id, err)
				}
			}
			for _, id := range tt.wantContainer {
				containerStatus(t, r, id)
			}
		})
	}
}

func TestInjectError(t *testing.T) {
	ctx := context.Background()
	r := New(webPod())
	r.InjectError(runtime.OpListContainers, errA)
	r.InjectError(runtime.OpListContainers, errB)
	r.InjectError(runtime.OpContainerStatus, errC)
	r.SetItemError("c-run", errB)

	// Other ops are not affected.
	if _, err := r.ListPodSandbox(ctx, nil); err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	if _, err := r.PodSandboxStatus(ctx, "s1", false); err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	// FIFO per op, one per call.
	for i, want := range []error{errA, errB, nil} {
		items, err := r.ListContainers(ctx, nil)
		if !errors.Is(err, want) {
			t.Fatalf("ListContainers call %d: err = %v, want %v", i, err, want)
		}
		if (err == nil) != (len(items) == 5) {
			t.Fatalf("ListContainers call %d: %d items with err %v", i, len(items), err)
		}
	}
	// An injected error comes before an item error, and applies to any ID.
	if _, err := r.ContainerStatus(ctx, "c-run", false); !errors.Is(err, errC) {
		t.Fatalf("ContainerStatus: err = %v, want the injected %v", err, errC)
	}
	if _, err := r.ContainerStatus(ctx, "c-run", false); !errors.Is(err, errB) {
		t.Fatalf("ContainerStatus: err = %v, want the item error %v", err, errB)
	}
	r.InjectError(runtime.OpContainerStatus, errA)
	if _, err := r.ContainerStatus(ctx, "unknown", false); !errors.Is(err, errA) {
		t.Fatalf("ContainerStatus of an unknown ID: err = %v, want the injected %v", err, errA)
	}
	if _, err := r.ContainerStatus(ctx, "unknown", false); status.Code(err) != codes.NotFound {
		t.Fatalf("ContainerStatus of an unknown ID: err = %v, want NotFound", err)
	}
	if n := r.Calls(runtime.OpListContainers); n != 3 {
		t.Fatalf("Calls(list_containers) = %d, want 3 (failed calls count)", n)
	}
}

func TestSetItemError(t *testing.T) {
	ctx := context.Background()
	r := New(webPod())
	r.SetItemError("c-ok", errA)
	r.SetItemError("s0", errB)
	r.SetItemError("gone", errC)

	for range 2 { // sticky
		if _, err := r.ContainerStatus(ctx, "c-ok", false); !errors.Is(err, errA) {
			t.Fatalf("ContainerStatus(c-ok) err = %v, want %v", err, errA)
		}
		if _, err := r.PodSandboxStatus(ctx, "s0", false); !errors.Is(err, errB) {
			t.Fatalf("PodSandboxStatus(s0) err = %v, want %v", err, errB)
		}
	}
	if _, err := r.ContainerStatus(ctx, "gone", false); !errors.Is(err, errC) {
		t.Fatalf("item error of an unknown ID: %v, want %v", err, errC)
	}
	if _, err := r.ContainerStatus(ctx, "c-run", false); err != nil {
		t.Fatalf("other container: %v", err)
	}
	if _, err := r.PodSandboxStatus(ctx, "s1", false); err != nil {
		t.Fatalf("other sandbox: %v", err)
	}
	// Lists ignore item errors.
	if got := listContainers(t, r, nil); len(got) != 5 {
		t.Fatalf("list = %d items", len(got))
	}
	r.SetItemError("c-ok", nil)
	r.SetItemError("s0", nil)
	if _, err := r.ContainerStatus(ctx, "c-ok", false); err != nil {
		t.Fatalf("after clearing: %v", err)
	}
	if _, err := r.PodSandboxStatus(ctx, "s0", false); err != nil {
		t.Fatalf("after clearing: %v", err)
	}
}

type reply struct {
	ok  bool
	err error
}

func TestSetHang(t *testing.T) {
	calls := []struct {
		name string
		op   Op
		id   string
		call func(r *Runtime, ctx context.Context, id string) (bool, error)
	}{
		{"container", runtime.OpContainerStatus, "c-run", func(r *Runtime, ctx context.Context, id string) (bool, error) {
			resp, err := r.ContainerStatus(ctx, id, false)
			return resp != nil, err
		}},
		{"sandbox", runtime.OpPodSandboxStatus, "s1", func(r *Runtime, ctx context.Context, id string) (bool, error) {
			resp, err := r.PodSandboxStatus(ctx, id, false)
			return resp != nil, err
		}},
	}
	for _, c := range calls {
		t.Run(c.name+"/cancel", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(webPod())
				r.SetHang(c.id, true)
				ctx, cancel := context.WithCancel(t.Context())
				ch := make(chan reply, 1)
				go func() {
					ok, err := c.call(r, ctx, c.id)
					ch <- reply{ok, err}
				}()
				synctest.Wait()
				select {
				case got := <-ch:
					t.Fatalf("hung call returned %+v", got)
				default:
				}
				// Other IDs and lists are not hung.
				if _, err := r.ContainerStatus(t.Context(), "c-ok", false); err != nil {
					t.Fatalf("other container: %v", err)
				}
				if _, err := r.PodSandboxStatus(t.Context(), "s0", false); err != nil {
					t.Fatalf("other sandbox: %v", err)
				}
				listContainers(t, r, nil)
				if r.ItemCalls(c.id) != 1 || r.Calls(c.op) != 2 {
					t.Fatalf("hung call not counted: item %d, op %d", r.ItemCalls(c.id), r.Calls(c.op))
				}
				cancel()
				synctest.Wait()
				select {
				case got := <-ch:
					if got.ok || status.Code(got.err) != codes.Canceled {
						t.Fatalf("after cancel: %+v, want no response and Canceled", got)
					}
				default:
					t.Fatalf("cancel did not release the hung call")
				}
			})
		})
		t.Run(c.name+"/deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(webPod())
				r.SetHang(c.id, true)
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				defer cancel()
				start := time.Now()
				ok, err := c.call(r, ctx, c.id)
				if ok || status.Code(err) != codes.DeadlineExceeded {
					t.Fatalf("got %v, %v; want DeadlineExceeded", ok, err)
				}
				if d := time.Since(start); d != 3*time.Second {
					t.Fatalf("hung for %v, want until the 3s deadline", d)
				}
			})
		})
		t.Run(c.name+"/cleared", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(webPod())
				r.SetHang(c.id, true)
				r.SetHang(c.id, false)
				ok, err := c.call(r, t.Context(), c.id)
				if !ok || err != nil {
					t.Fatalf("after clearing: %v, %v", ok, err)
				}
			})
		})
	}
}

func TestSetLatency(t *testing.T) {
	ops := []struct {
		op   Op
		call func(r *Runtime, ctx context.Context) error
	}{
		{runtime.OpListPodSandbox, func(r *Runtime, ctx context.Context) error { _, err := r.ListPodSandbox(ctx, nil); return err }},
		{runtime.OpListContainers, func(r *Runtime, ctx context.Context) error { _, err := r.ListContainers(ctx, nil); return err }},
		{runtime.OpPodSandboxStatus, func(r *Runtime, ctx context.Context) error {
			_, err := r.PodSandboxStatus(ctx, "s1", false)
			return err
		}},
		{runtime.OpContainerStatus, func(r *Runtime, ctx context.Context) error {
			_, err := r.ContainerStatus(ctx, "c-run", false)
			return err
		}},
	}
	const d = 250 * time.Millisecond
	for _, o := range ops {
		t.Run(string(o.op)+"/waits", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(webPod())
				r.SetLatency(o.op, d)
				for _, other := range ops {
					start := time.Now()
					if err := other.call(r, t.Context()); err != nil {
						t.Fatalf("%s: %v", other.op, err)
					}
					want := time.Duration(0)
					if other.op == o.op {
						want = d
					}
					if got := time.Since(start); got != want {
						t.Fatalf("%s took %v, want %v", other.op, got, want)
					}
				}
				// An injected error is reported after the latency.
				r.InjectError(o.op, errA)
				start := time.Now()
				if err := o.call(r, t.Context()); !errors.Is(err, errA) {
					t.Fatalf("err = %v, want %v", err, errA)
				}
				if got := time.Since(start); got != d {
					t.Fatalf("failing call took %v, want %v", got, d)
				}
				r.SetLatency(o.op, 0)
				start = time.Now()
				if err := o.call(r, t.Context()); err != nil || time.Since(start) != 0 {
					t.Fatalf("after clearing latency: %v after %v", err, time.Since(start))
				}
			})
		})
		t.Run(string(o.op)+"/cancelled", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := New(webPod())
				r.SetLatency(o.op, time.Hour)
				ctx, cancel := context.WithCancel(t.Context())
				ch := make(chan error, 1)
				start := time.Now()
				go func() { ch <- o.call(r, ctx) }()
				synctest.Wait()
				select {
				case err := <-ch:
					t.Fatalf("returned before the latency: %v", err)
				default:
				}
				cancel()
				synctest.Wait()
				select {
				case err := <-ch:
					if status.Code(err) != codes.Canceled {
						t.Fatalf("err = %v, want Canceled", err)
					}
					if time.Since(start) != 0 {
						t.Fatalf("took %v of bubble time", time.Since(start))
					}
				default:
					t.Fatalf("cancel did not cut the latency short")
				}
			})
		})
	}
	// Outside a bubble too: an ended context cuts a long latency short.
	t.Run("real time", func(t *testing.T) {
		r := New(webPod())
		r.SetLatency(runtime.OpListContainers, time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.ListContainers(ctx, nil); status.Code(err) != codes.Canceled {
			t.Fatalf("err = %v, want Canceled", err)
		}
	})
}

func TestCalls(t *testing.T) {
	ctx := context.Background()
	r := New(webPod())
	r.SetItemError("c-ok", errA)
	_, _ = r.ListPodSandbox(ctx, nil)
	_, _ = r.ListContainers(ctx, nil)
	_, _ = r.ListContainers(ctx, runtime.ContainerFilterForPod("u1"))
	_, _ = r.PodSandboxStatus(ctx, "s1", false)
	_, _ = r.ContainerStatus(ctx, "c-run", false)
	_, _ = r.ContainerStatus(ctx, "c-run", true)
	_, _ = r.ContainerStatus(ctx, "c-ok", false)  // fails
	_, _ = r.ContainerStatus(ctx, "gone", false)  // NotFound
	_, _ = r.PodSandboxStatus(ctx, "gone", false) // NotFound

	wantOps := map[Op]int{runtime.OpListPodSandbox: 1, runtime.OpListContainers: 2, runtime.OpPodSandboxStatus: 2, runtime.OpContainerStatus: 4}
	for op, want := range wantOps {
		if got := r.Calls(op); got != want {
			t.Errorf("Calls(%s) = %d, want %d", op, got, want)
		}
	}
	wantItems := map[string]int{"s1": 1, "c-run": 2, "c-ok": 1, "gone": 2, "c-err": 0, "": 0}
	for id, want := range wantItems {
		if got := r.ItemCalls(id); got != want {
			t.Errorf("ItemCalls(%q) = %d, want %d", id, got, want)
		}
	}
	r.ResetCalls()
	for op := range wantOps {
		if got := r.Calls(op); got != 0 {
			t.Errorf("after ResetCalls: Calls(%s) = %d", op, got)
		}
	}
	for id := range wantItems {
		if got := r.ItemCalls(id); got != 0 {
			t.Errorf("after ResetCalls: ItemCalls(%q) = %d", id, got)
		}
	}
	// Counting goes on after a reset; scripting survives it.
	_, _ = r.ContainerStatus(ctx, "c-ok", false)
	if r.Calls(runtime.OpContainerStatus) != 1 || r.ItemCalls("c-ok") != 1 {
		t.Errorf("counting after reset: %d, %d", r.Calls(runtime.OpContainerStatus), r.ItemCalls("c-ok"))
	}
	if _, err := r.ContainerStatus(ctx, "c-ok", false); !errors.Is(err, errA) {
		t.Errorf("ResetCalls cleared an item error: %v", err)
	}
}

func TestLoadAndSetPods(t *testing.T) {
	r := New(webPod())
	first := listContainers(t, r, nil)

	s := NewSnapshot(dbPod(), webPod())
	r.Load(s)
	if got := sandboxIDs(listSandboxes(t, r, nil)); !slices.Equal(got, []string{"s2", "s1", "s0"}) {
		t.Fatalf("after Load: sandboxes %v, in the order of the pods given", got)
	}
	if len(first) != 5 {
		t.Fatalf("Load changed an earlier list result")
	}

	r.SetPods(dbPod())
	if got := containerIDs(listContainers(t, r, nil)); !slices.Equal(got, []string{"c2"}) {
		t.Fatalf("after SetPods: containers %v", got)
	}
	if _, err := r.ContainerStatus(context.Background(), "c-run", false); status.Code(err) != codes.NotFound {
		t.Fatalf("status of a container of the old state: %v, want NotFound", err)
	}

	r.SetPods()
	if len(listSandboxes(t, r, nil)) != 0 || len(listContainers(t, r, nil)) != 0 {
		t.Fatalf("SetPods() left items")
	}

	// Scripting and counters survive a state change.
	r.SetItemError("c2", errA)
	r.Load(NewSnapshot(dbPod()))
	if _, err := r.ContainerStatus(context.Background(), "c2", false); !errors.Is(err, errA) {
		t.Fatalf("item error lost by Load: %v", err)
	}
	if r.Calls(runtime.OpListContainers) == 0 {
		t.Fatalf("counters lost by Load")
	}
}

func TestAddRaw(t *testing.T) {
	ctx := context.Background()
	s := NewSnapshot(webPod())
	noMeta := &runtimeapi.PodSandbox{Id: "raw-s", State: sbReady}
	labelsOnly := &runtimeapi.PodSandbox{Id: "raw-l", Labels: map[string]string{runtime.PodUIDLabel: "u9"}}
	bare := &runtimeapi.Container{Id: "raw-c"}
	nilStatus := &runtimeapi.Container{Id: "raw-nil", Labels: map[string]string{runtime.PodUIDLabel: "u9"}}
	s.AddRaw(
		[]*runtimeapi.PodSandbox{noMeta, nil, labelsOnly},
		[]*runtimeapi.Container{bare, nilStatus, nil},
		map[string]*runtimeapi.PodSandboxStatus{"raw-s": {Id: "raw-s", State: sbReady}},
		map[string]*runtimeapi.ContainerStatus{"raw-nil": nil},
	)
	s.AddRaw(nil, nil, nil, nil)
	r := New()
	r.Load(s)

	sbs := listSandboxes(t, r, nil)
	if len(sbs) != 5 || sbs[2] != noMeta || sbs[3] != nil || sbs[4] != labelsOnly {
		t.Fatalf("ListPodSandbox = %v, want the raw items exactly as given after the pod's", sbs)
	}
	cs := listContainers(t, r, nil)
	if len(cs) != 8 || cs[5] != bare || cs[6] != nilStatus || cs[7] != nil {
		t.Fatalf("ListContainers = %v", cs)
	}
	// Filters skip malformed items without failing.
	if got := sandboxIDs(listSandboxes(t, r, runtime.PodSandboxFilterForPod("u9"))); !slices.Equal(got, []string{"raw-l"}) {
		t.Fatalf("label filter = %v", got)
	}
	if got := containerIDs(listContainers(t, r, runtime.ContainerFilterForPod("u9"))); !slices.Equal(got, []string{"raw-nil"}) {
		t.Fatalf("container label filter = %v", got)
	}
	if got := containerIDs(listContainers(t, r, &runtimeapi.ContainerFilter{PodSandboxId: "s1", State: &runtimeapi.ContainerStateValue{State: cRunning}})); !slices.Equal(got, []string{"c-run"}) {
		t.Fatalf("container sandbox and state filter = %v", got)
	}

	// Statuses: given, nil (a nil status without error) or absent (NotFound).
	if resp, err := r.PodSandboxStatus(ctx, "raw-s", false); err != nil || resp.GetStatus().GetId() != "raw-s" {
		t.Fatalf("raw sandbox status = %v, %v", resp, err)
	}
	if _, err := r.PodSandboxStatus(ctx, "raw-l", false); status.Code(err) != codes.NotFound {
		t.Fatalf("raw sandbox without status: %v, want NotFound", err)
	}
	if resp, err := r.ContainerStatus(ctx, "raw-nil", false); err != nil || resp.GetStatus() != nil {
		t.Fatalf("raw container with nil status = %v, %v; want a nil status and no error", resp, err)
	}
	if _, err := r.ContainerStatus(ctx, "raw-c", false); status.Code(err) != codes.NotFound {
		t.Fatalf("raw container without status: %v, want NotFound", err)
	}
	// InspectPod reports the nil status.
	pod := &runtime.Pod{UID: "u9", Sandboxes: []*runtimeapi.PodSandbox{labelsOnly}, Containers: []*runtimeapi.Container{nilStatus}}
	if _, err := runtime.InspectPod(ctx, r, pod); !errors.Is(err, runtime.ErrNilStatus) {
		t.Fatalf("InspectPod = %v, want ErrNilStatus", err)
	}

	// Changing and removing work around malformed items.
	if err := r.SetContainerState("raw-c", cRunning, 0); err != nil {
		t.Fatalf("SetContainerState(raw-c): %v", err)
	}
	if err := r.SetContainerState("", cRunning, 0); err == nil {
		t.Fatalf("SetContainerState(\"\") matched a nil item")
	}
	r.RemovePod("u9")
	if got := sandboxIDs(listSandboxes(t, r, nil)); !slices.Equal(got, []string{"s1", "s0", "raw-s", ""}) {
		t.Fatalf("sandboxes after RemovePod(u9) = %v", got)
	}
	if got := containerIDs(listContainers(t, r, nil)); slices.Contains(got, "raw-nil") || !slices.Contains(got, "raw-c") {
		t.Fatalf("containers after RemovePod(u9) = %v", got)
	}
	r.Remove("raw-s", "raw-c")
	if got := sandboxIDs(listSandboxes(t, r, nil)); !slices.Equal(got, []string{"s1", "s0", ""}) {
		t.Fatalf("sandboxes after Remove = %v", got)
	}
}

// InspectPod over the fake sees what the fake scripts, reuses the listed
// items and skips what was removed after the list.
func TestInspectPodOverFake(t *testing.T) {
	ctx := context.Background()
	r := New(webPod(), dbPod())
	sbs := listSandboxes(t, r, runtime.PodSandboxFilterForPod("u1"))
	cs := listContainers(t, r, runtime.ContainerFilterForPod("u1"))
	r.Remove("c-ok")
	r.ResetCalls()

	st, err := runtime.InspectPod(ctx, r, &runtime.Pod{UID: "u1", Name: "web", Namespace: "ns", Sandboxes: sbs, Containers: cs})
	if err != nil {
		t.Fatalf("InspectPod: %v", err)
	}
	var got []string
	for _, c := range st.Containers {
		got = append(got, c.GetId())
	}
	if want := []string{"c-oom", "c-err", "c-created", "c-run"}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	if want := []string{"10.0.0.1", "fd00::1", "10.0.0.9"}; !slices.Equal(st.IPs, want) {
		t.Errorf("IPs = %v, want %v", st.IPs, want)
	}
	if len(st.Sandboxes) != 2 || st.Sandboxes[0].GetId() != "s1" {
		t.Errorf("sandboxes = %v", st.Sandboxes)
	}
	if r.Calls(runtime.OpListPodSandbox)+r.Calls(runtime.OpListContainers) != 0 {
		t.Errorf("InspectPod listed")
	}
	if r.Calls(runtime.OpPodSandboxStatus) != 2 || r.Calls(runtime.OpContainerStatus) != 5 || r.ItemCalls("c-ok") != 1 {
		t.Errorf("status calls = %d/%d", r.Calls(runtime.OpPodSandboxStatus), r.Calls(runtime.OpContainerStatus))
	}

	// The newest sandbox goes NOT_READY: no IPs.
	r.SetPods(Pod{UID: "u1", IPs: []string{"10.0.0.1"}, Sandboxes: []Sandbox{{ID: "s1", State: sbNotReady, CreatedAt: 2}, {ID: "s0", State: sbReady, CreatedAt: 1}}})
	st, err = runtime.InspectPod(ctx, r, &runtime.Pod{UID: "u1", Sandboxes: listSandboxes(t, r, nil)})
	if err != nil || len(st.IPs) != 0 {
		t.Errorf("IPs with a not-ready newest sandbox = %v (%v)", st.IPs, err)
	}
}

// Every method may be called from many goroutines at once, and list items
// and statuses handed out are never written afterwards.
func TestConcurrent(t *testing.T) {
	r := New(webPod(), dbPod())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // guard only
	defer cancel()
	const n = 200
	var wg sync.WaitGroup
	// Readers that look into everything they get.
	for range 4 {
		wg.Go(func() {
			for range n {
				sbs, _ := r.ListPodSandbox(ctx, nil)
				cs, _ := r.ListContainers(ctx, runtime.ContainerFilterForPod("u1"))
				for _, s := range sbs {
					_ = s.String()
					if resp, err := r.PodSandboxStatus(ctx, s.GetId(), false); err == nil {
						_ = resp.GetStatus().String()
					}
				}
				for _, c := range cs {
					_ = c.String()
					if resp, err := r.ContainerStatus(ctx, c.GetId(), false); err == nil {
						_ = resp.GetStatus().String()
					}
				}
				_, _ = runtime.InspectPod(ctx, r, &runtime.Pod{UID: "u1", Sandboxes: sbs, Containers: cs})
			}
		})
	}
	// Writers.
	wg.Go(func() {
		states := []runtimeapi.ContainerState{cRunning, cExited, cCreated}
		for i := range n {
			_ = r.SetContainerState("c-run", states[i%3], int32(i))
			_ = r.SetContainerState("c-ok", states[(i+1)%3], 0)
		}
	})
	wg.Go(func() {
		for i := range n {
			p := Pod{UID: "tmp", Sandboxes: []Sandbox{{ID: "tmp-s" + strconv.Itoa(i), State: sbReady}},
				Containers: []Container{{ID: "tmp-c" + strconv.Itoa(i), State: cRunning}}}
			r.AddPod(p)
			r.AddContainer(p, Container{ID: "tmp-x" + strconv.Itoa(i)})
			r.RemovePod("tmp")
			r.Remove("c2")
			if i%50 == 0 {
				r.SetPods(webPod(), dbPod())
			}
		}
	})
	wg.Go(func() {
		for i := range n {
			r.InjectError(runtime.OpListContainers, errA)
			r.SetItemError("c-err", errB)
			r.SetHang("c-created", false)
			r.SetLatency(runtime.OpListPodSandbox, 0)
			r.SetItemError("c-err", nil)
			r.Calls(runtime.OpListContainers)
			r.ItemCalls("c-run")
			if i%10 == 0 {
				r.ResetCalls()
			}
		}
	})
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("guard timeout hit")
	}
	// Drain the injected errors the readers did not consume.
	for range n + 1 {
		if _, err := r.ListContainers(ctx, nil); err == nil {
			break
		}
	}
	if got := containerIDs(listContainers(t, r, runtime.ContainerFilterForPod("tmp"))); len(got) != 0 {
		t.Fatalf("temporary pod left behind: %v", got)
	}
}
