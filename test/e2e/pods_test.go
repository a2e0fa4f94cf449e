// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime"
)

// TestPodsMatchCRI is the cross-check a person would make with crictl
// (`crictl pods`, `crictl ps -a`, `crictl inspect`), without crictl: what
// `pleg pods -o json` shows of a set of pods is what the runtime's own
// lists and status calls say of them, field by field. The pods hold a
// running container, one that exited with a code, one created and never
// started, and a pod whose sandbox was stopped.
func TestPodsMatchCRI(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		running, stopped := newPod("cross-running"), newPod("cross-stopped")
		sb, err := in.RunPod(ctx(t), running)
		must(t, err)
		_, err = in.RunContainer(ctx(t), sb, running, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		job, err := in.RunContainer(ctx(t), sb, running, runtimetest.ContainerSpec{Name: "job", Args: []string{"exit", "3"}, Attempt: 2})
		must(t, err)
		_, err = in.CreateContainer(ctx(t), sb, running, runtimetest.ContainerSpec{Name: "init", Args: sleeping})
		must(t, err)
		ssb, err := in.RunPod(ctx(t), stopped)
		must(t, err)
		_, err = in.RunContainer(ctx(t), ssb, stopped, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		must(t, in.StopPod(ctx(t), ssb))
		wait(t, "the job to exit", func() bool {
			st, err := in.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: job})
			return err == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
		})

		bin, err := plegBinary()
		must(t, err)
		out, err := exec.CommandContext(ctx(t), bin, "pods", "-o", "json", "-r", in.Endpoint).Output()
		if err != nil {
			t.Fatalf("pleg pods: %v\n%s", err, out)
		}
		var list api.PodList
		must(t, json.Unmarshal(out, &list))
		shown := map[string]api.Pod{}
		for _, p := range list.Pods {
			shown[p.UID] = p
		}
		for _, pod := range []runtimetest.PodSpec{running, stopped} {
			got, ok := shown[pod.UID]
			if !ok {
				t.Errorf("pleg pods does not show %s/%s", pod.Namespace, pod.Name)
				continue
			}
			want := podFromCRI(t, in, pod)
			for _, d := range comparePods(got, want) {
				t.Errorf("%s, %s: %s", in.Spec, pod.Name, d)
			}
		}
	})
}

// podFromCRI is what the runtime's lists and statuses say of pod, in the
// API's shape.
func podFromCRI(t *testing.T, in *runtimetest.Instance, pod runtimetest.PodSpec) api.Pod {
	t.Helper()
	p := api.Pod{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	sandboxes, err := in.Runtime.ListPodSandbox(ctx(t), &runtimeapi.ListPodSandboxRequest{Filter: runtime.PodSandboxFilterForPod(pod.UID)})
	must(t, err)
	for _, sb := range sandboxes.GetItems() {
		st, err := in.Runtime.PodSandboxStatus(ctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.GetId()})
		must(t, err)
		s := st.GetStatus()
		p.Sandboxes = append(p.Sandboxes, api.Sandbox{ID: s.GetId(), State: api.SandboxState(s.GetState()), Attempt: s.GetMetadata().GetAttempt(), CreatedAt: at(s.GetCreatedAt())})
	}
	containers, err := in.Runtime.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{Filter: runtime.ContainerFilterForPod(pod.UID)})
	must(t, err)
	for _, c := range containers.GetContainers() {
		st, err := in.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
		must(t, err)
		s := st.GetStatus()
		restarts, _ := strconv.Atoi(s.GetAnnotations()[runtimetest.AnnotationRestartCount])
		ct := api.Container{ID: s.GetId(), Name: s.GetMetadata().GetName(), State: api.ContainerState(s.GetState()),
			CreatedAt: at(s.GetCreatedAt()), StartedAt: at(s.GetStartedAt()), FinishedAt: at(s.GetFinishedAt()),
			Reason: s.GetReason(), Message: s.GetMessage(), RestartCount: restarts, Image: s.GetImage().GetImage()}
		if s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			code := s.GetExitCode()
			ct.ExitCode = &code
		}
		p.Containers = append(p.Containers, ct)
	}
	return p
}

func at(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// comparePods lists how got differs from want: its sandboxes and
// containers, by ID, field by field.
func comparePods(got, want api.Pod) []string {
	var diffs []string
	if got.Name != want.Name || got.Namespace != want.Namespace {
		diffs = append(diffs, fmt.Sprintf("shown as %s/%s", got.Namespace, got.Name))
	}
	if got.Error != "" {
		diffs = append(diffs, "inspection error "+got.Error)
	}
	sandboxes := map[string]api.Sandbox{}
	for _, s := range got.Sandboxes {
		sandboxes[s.ID] = s
	}
	for _, w := range want.Sandboxes {
		if g, ok := sandboxes[w.ID]; !ok {
			diffs = append(diffs, fmt.Sprintf("sandbox %.12s missing", w.ID))
		} else if g.State != w.State || g.Attempt != w.Attempt || !sameTime(g.CreatedAt, w.CreatedAt) {
			diffs = append(diffs, fmt.Sprintf("sandbox shown as %+v, the runtime says %+v", g, w))
		}
		delete(sandboxes, w.ID)
	}
	for id := range sandboxes {
		diffs = append(diffs, fmt.Sprintf("sandbox %.12s shown, the runtime has none", id))
	}
	containers := map[string]api.Container{}
	for _, c := range got.Containers {
		containers[c.ID] = c
	}
	for _, w := range want.Containers {
		g, ok := containers[w.ID]
		delete(containers, w.ID)
		if !ok {
			diffs = append(diffs, fmt.Sprintf("container %s %.12s missing", w.Name, w.ID))
			continue
		}
		if g.Name != w.Name || g.State != w.State || g.Reason != w.Reason || g.Message != w.Message || g.RestartCount != w.RestartCount ||
			!sameTime(g.CreatedAt, w.CreatedAt) || !sameTime(g.StartedAt, w.StartedAt) || !sameTime(g.FinishedAt, w.FinishedAt) ||
			(g.ExitCode == nil) != (w.ExitCode == nil) || g.ExitCode != nil && *g.ExitCode != *w.ExitCode ||
			w.Image != "" && g.Image != w.Image {
			diffs = append(diffs, fmt.Sprintf("container %s shown as %s, the runtime says %s", w.Name, containerString(g), containerString(w)))
		}
	}
	for id, c := range containers {
		diffs = append(diffs, fmt.Sprintf("container %s %.12s shown, the runtime has none", c.Name, id))
	}
	return diffs
}

func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

func containerString(c api.Container) string {
	code := "-"
	if c.ExitCode != nil {
		code = strconv.Itoa(int(*c.ExitCode))
	}
	return fmt.Sprintf("{%s attempt %d exit %s %q %q created %v started %v finished %v image %q}",
		c.State, c.RestartCount, code, c.Reason, c.Message, c.CreatedAt, c.StartedAt, c.FinishedAt, c.Image)
}
