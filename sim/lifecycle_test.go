// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func containerIDs(items []*runtimeapi.Container) []string {
	var ids []string
	for _, c := range items {
		ids = append(ids, c.GetId())
	}
	return ids
}

func sandboxIDs(items []*runtimeapi.PodSandbox) []string {
	var ids []string
	for _, sb := range items {
		ids = append(ids, sb.GetId())
	}
	return ids
}

// subscribe opens an event stream and waits until the simulator has
// registered it, so that later changes reach it.
func subscribe(t *testing.T, s *Sim, client runtimeapi.RuntimeServiceClient, ctx context.Context) runtimeapi.RuntimeService_GetContainerEventsClient {
	t.Helper()
	before := s.Stats().Subscribers
	stream, err := client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the event stream to be registered", func() bool { return s.Stats().Subscribers > before })
	return stream
}

// A client sees a consistent runtime: what it creates, starts, stops and
// removes is listed and inspected accordingly, and the event stream
// reports each change in order, with containerd's payloads.
func TestLifecycleThroughCRI(t *testing.T) {
	s := startSim(t, Options{})
	client := dial(t, s)
	ctx := testContext(t)
	events := subscribe(t, s, client, ctx)

	if v, err := client.Version(ctx, &runtimeapi.VersionRequest{}); err != nil || v.GetRuntimeName() != RuntimeName || v.GetRuntimeApiVersion() != "v1" {
		t.Fatalf("Version: %v, %v", v, err)
	}
	if st, err := client.Status(ctx, &runtimeapi.StatusRequest{}); err != nil || len(st.GetStatus().GetConditions()) != 2 || !st.GetStatus().GetConditions()[0].GetStatus() {
		t.Fatalf("Status: %v, %v", st, err)
	}

	run, err := client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("web", "uid-web")})
	if err != nil {
		t.Fatal(err)
	}
	sb := run.GetPodSandboxId()
	if len(sb) != 64 {
		t.Fatalf("sandbox ID %q is not 64 hex digits", sb)
	}
	if _, err := client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("web", "uid-web")}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second sandbox of one name: %v, want AlreadyExists", err)
	}
	other, err := client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("db", "uid-db")})
	if err != nil {
		t.Fatal(err)
	}

	create := func(name string) string {
		t.Helper()
		resp, err := client.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfigFor("web", "uid-web", name, 0)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetContainerId()
	}
	c1 := create("app")
	if _, err := client.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c1}); err != nil {
		t.Fatal(err)
	}
	c2 := create("sidecar")
	if _, err := client.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c2}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c2}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("starting a running container: %v, want FailedPrecondition", err)
	}

	// Lists and their filters.
	list := func(f *runtimeapi.ContainerFilter) []string {
		t.Helper()
		resp, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		return containerIDs(resp.GetContainers())
	}
	running := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	exited := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"all", nil, []string{c1, c2}},
		{"id", &runtimeapi.ContainerFilter{Id: c2}, []string{c2}},
		{"id prefix", &runtimeapi.ContainerFilter{Id: c2[:12]}, []string{c2}},
		{"unknown id", &runtimeapi.ContainerFilter{Id: strings.Repeat("0", 64)}, nil},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: sb}, []string{c1, c2}},
		{"other sandbox", &runtimeapi.ContainerFilter{PodSandboxId: other.GetPodSandboxId()}, nil},
		{"running", &runtimeapi.ContainerFilter{State: running}, []string{c1, c2}},
		{"exited", &runtimeapi.ContainerFilter{State: exited}, nil},
		{"pod label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-web"}}, []string{c1, c2}},
		{"pod and name labels", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-web", "io.kubernetes.container.name": "sidecar"}}, []string{c2}},
		{"other label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": "app"}}, []string{c1}},
		{"no such label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-db"}}, nil},
	} {
		if got := list(tc.filter); !slices.Equal(got, tc.want) {
			t.Errorf("ListContainers %s: %v, want %v", tc.name, got, tc.want)
		}
	}
	sbResp, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-db"}}})
	if err != nil || !slices.Equal(sandboxIDs(sbResp.GetItems()), []string{other.GetPodSandboxId()}) {
		t.Fatalf("ListPodSandbox by pod label: %v, %v", sandboxIDs(sbResp.GetItems()), err)
	}

	// Stop one container: it is exited with SIGTERM's code.
	if _, err := client.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c1, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c1, Timeout: 30}); err != nil {
		t.Fatalf("stopping a stopped container: %v", err)
	}
	st, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c1})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.GetStatus(); s.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || s.GetExitCode() != 143 || s.GetReason() != "Error" || s.GetFinishedAt() < s.GetStartedAt() || s.GetStartedAt() < s.GetCreatedAt() {
		t.Fatalf("status of a stopped container: %v", s)
	}
	if got := list(&runtimeapi.ContainerFilter{State: exited}); !slices.Equal(got, []string{c1}) {
		t.Fatalf("exited containers: %v", got)
	}

	// Remove it: gone from lists and statuses; removing again succeeds.
	if _, err := client.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c1}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c1}); err != nil {
		t.Fatalf("removing a removed container: %v", err)
	}
	if _, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c1}); status.Code(err) != codes.NotFound {
		t.Fatalf("status of a removed container: %v, want NotFound", err)
	}
	if got := list(nil); !slices.Equal(got, []string{c2}) {
		t.Fatalf("containers after removal: %v", got)
	}

	// Stop the sandbox: its running container is killed, then it is not
	// ready and has no network.
	if _, err := client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	sbs, err := client.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if sbs.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || sbs.GetStatus().GetNetwork() != nil || sbs.GetInfo()["info"] == "" {
		t.Fatalf("status of a stopped sandbox: %v", sbs)
	}
	if st, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c2}); err != nil || st.GetStatus().GetExitCode() != 137 {
		t.Fatalf("container of a stopped sandbox: %v, %v", st, err)
	}
	if _, err := client.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfigFor("web", "uid-web", "late", 0)}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("creating a container in a stopped sandbox: %v, want FailedPrecondition", err)
	}
	notReady := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	if resp, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{State: notReady}}); err != nil || !slices.Equal(sandboxIDs(resp.GetItems()), []string{sb}) {
		t.Fatalf("not ready sandboxes: %v, %v", resp, err)
	}

	// Remove the sandbox: it and its containers are gone.
	if _, err := client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("removing a removed sandbox: %v", err)
	}
	if _, err := client.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb}); status.Code(err) != codes.NotFound {
		t.Fatalf("status of a removed sandbox: %v, want NotFound", err)
	}
	if _, err := client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("stopping a removed sandbox: %v, want success (the CRI's idempotence)", err)
	}
	if got := list(nil); len(got) != 0 {
		t.Fatalf("containers after sandbox removal: %v", got)
	}
	if resp, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || !slices.Equal(sandboxIDs(resp.GetItems()), []string{other.GetPodSandboxId()}) {
		t.Fatalf("sandboxes after removal: %v, %v", resp, err)
	}

	// The events, in order.
	type want struct {
		id    string
		typ   runtimeapi.ContainerEventType
		check func(*runtimeapi.ContainerEventResponse) error
	}
	const (
		created = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
		started = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
		stopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
		deleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	)
	sandboxState := func(want runtimeapi.PodSandboxState) func(*runtimeapi.ContainerEventResponse) error {
		return func(ev *runtimeapi.ContainerEventResponse) error {
			if ev.GetPodSandboxStatus().GetState() != want || ev.GetPodSandboxStatus().GetId() != sb {
				return errors.New("sandbox status " + ev.GetPodSandboxStatus().String())
			}
			return nil
		}
	}
	containers := func(states map[string]runtimeapi.ContainerState) func(*runtimeapi.ContainerEventResponse) error {
		return func(ev *runtimeapi.ContainerEventResponse) error {
			if ev.GetPodSandboxStatus().GetId() != sb {
				return errors.New("no sandbox status")
			}
			got := make(map[string]runtimeapi.ContainerState)
			for _, c := range ev.GetContainersStatuses() {
				got[c.GetId()] = c.GetState()
			}
			if len(got) != len(states) {
				var desc []string
				for _, c := range ev.GetContainersStatuses() {
					desc = append(desc, c.GetId()[:8]+"="+c.GetState().String())
				}
				return errors.New("container statuses " + strings.Join(desc, ","))
			}
			for id, st := range states {
				if got[id] != st {
					return errors.New("container " + id[:8] + " is " + got[id].String() + ", want " + st.String())
				}
			}
			return nil
		}
	}
	const (
		cCreated = runtimeapi.ContainerState_CONTAINER_CREATED
		cRunning = runtimeapi.ContainerState_CONTAINER_RUNNING
		cExited  = runtimeapi.ContainerState_CONTAINER_EXITED
	)
	ready, notready := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	wants := []want{
		{sb, created, sandboxState(ready)}, // already ready, as in containerd
		{sb, started, sandboxState(ready)},
		{other.GetPodSandboxId(), created, nil},
		{other.GetPodSandboxId(), started, nil},
		{c1, created, containers(map[string]runtimeapi.ContainerState{c1: cCreated})},
		{c1, started, containers(map[string]runtimeapi.ContainerState{c1: cRunning})},
		{c2, created, containers(map[string]runtimeapi.ContainerState{c1: cRunning, c2: cCreated})},
		{c2, started, containers(map[string]runtimeapi.ContainerState{c1: cRunning, c2: cRunning})},
		{c1, stopped, containers(map[string]runtimeapi.ContainerState{c1: cExited, c2: cRunning})},
		// DELETED is sent after the removal: the container is absent.
		{c1, deleted, containers(map[string]runtimeapi.ContainerState{c2: cRunning})},
		// StopPodSandbox stops the containers first, then the sandbox.
		{c2, stopped, containers(map[string]runtimeapi.ContainerState{c2: cExited})},
		{sb, stopped, sandboxState(notready)},
		// RemovePodSandbox removes the containers, then sends the
		// sandbox's DELETED while its status is still there.
		{c2, deleted, containers(map[string]runtimeapi.ContainerState{})},
		{sb, deleted, func(ev *runtimeapi.ContainerEventResponse) error {
			if err := sandboxState(notready)(ev); err != nil {
				return err
			}
			if len(ev.GetContainersStatuses()) != 0 {
				return errors.New("containers left")
			}
			return nil
		}},
	}
	var last int64
	for i, w := range wants {
		ev, err := events.Recv()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.GetContainerId() != w.id || ev.GetContainerEventType() != w.typ {
			t.Fatalf("event %d: %s %.12s, want %s %.12s", i, ev.GetContainerEventType(), ev.GetContainerId(), w.typ, w.id)
		}
		if w.check != nil {
			if err := w.check(ev); err != nil {
				t.Errorf("event %d (%s %.12s): %v", i, w.typ, w.id, err)
			}
		}
		if ev.GetCreatedAt() < last || ev.GetCreatedAt() == 0 {
			t.Errorf("event %d: created_at %d after %d", i, ev.GetCreatedAt(), last)
		}
		last = ev.GetCreatedAt()
	}
	if got := s.Stats().EventsSent; got != uint64(len(wants)) {
		t.Errorf("EventsSent = %d, want %d", got, len(wants))
	}
}

// The Stream* lists send what the unary lists answer, in batches.
func TestStreamLists(t *testing.T) {
	s := startSim(t, Options{Pods: 1250, Containers: 2})
	client := dial(t, s)
	ctx := testContext(t)

	unary, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var streamed []*runtimeapi.Container
	var batches []int
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, len(resp.GetContainers()))
		streamed = append(streamed, resp.GetContainers()...)
	}
	if !slices.Equal(batches, []int{1000, 1000, 500}) {
		t.Errorf("batches %v, want 1000, 1000, 500", batches)
	}
	if !slices.Equal(containerIDs(streamed), containerIDs(unary.GetContainers())) || len(streamed) != 2500 {
		t.Errorf("streamed %d containers, listed %d", len(streamed), len(unary.GetContainers()))
	}

	sbStream, err := client.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{Filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		resp, err := sbStream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(resp.GetPodSandboxes())
	}
	if n != 1250 {
		t.Errorf("streamed %d sandboxes, want 1250", n)
	}

	// Every pod has the kubelet's labels and annotations, and containers
	// are listed with their pod.
	first := unary.GetContainers()[0]
	for _, key := range []string{"io.kubernetes.pod.uid", "io.kubernetes.pod.name", "io.kubernetes.pod.namespace", "io.kubernetes.container.name"} {
		if first.GetLabels()[key] == "" {
			t.Errorf("container label %s missing: %v", key, first.GetLabels())
		}
	}
	for _, key := range []string{"io.kubernetes.container.restartCount", "io.kubernetes.container.hash"} {
		if first.GetAnnotations()[key] == "" {
			t.Errorf("container annotation %s missing: %v", key, first.GetAnnotations())
		}
	}
	byPod, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": first.GetLabels()["io.kubernetes.pod.uid"]}}})
	if err != nil || len(byPod.GetContainers()) != 2 {
		t.Fatalf("containers of one pod: %v, %v", containerIDs(byPod.GetContainers()), err)
	}
}
