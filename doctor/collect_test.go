// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/sim"
)

// Pods are grouped as the kubelet groups them.
func TestGroupPods(t *testing.T) {
	labels := func(uid, name string) map[string]string {
		return map[string]string{runtime.PodUIDLabel: uid, runtime.PodNameLabel: name, runtime.PodNamespaceLabel: "ns", runtime.ContainerNameLabel: "app"}
	}
	sandboxes := []*runtimeapi.PodSandbox{
		{Id: "sb-old", CreatedAt: 1, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1", Name: "b", Namespace: "ns"}},
		{Id: "sb-new", CreatedAt: 2, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1", Name: "b", Namespace: "ns"}},
		{Id: "sb-2", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u2", Name: "a", Namespace: "ns"}},
		{Id: "sb-nometa"},
		nil,
	}
	containers := []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "sb-new", Labels: labels("u1", "b")},
		// No pod label: its sandbox's pod.
		{Id: "c2", PodSandboxId: "sb-2"},
		// Neither label nor known sandbox: left out.
		{Id: "c3", PodSandboxId: "sb-gone"},
		// A pod seen through its containers only.
		{Id: "c4", Labels: labels("u3", "c")},
		{PodSandboxId: "sb-2"},
		nil,
	}
	pods := groupPods(sandboxes, containers)
	var got []string
	for _, p := range pods {
		var ids []string
		for _, sb := range p.sandboxes {
			ids = append(ids, sb.GetId())
		}
		for _, c := range p.containers {
			ids = append(ids, c.GetId())
		}
		got = append(got, fmt.Sprintf("%s %v", p.ref, ids))
	}
	want := []string{"ns/a [sb-2 c2]", "ns/b [sb-new sb-old c1]", "ns/c [c4]"}
	if !slices.Equal(got, want) {
		t.Errorf("pods %q, want %q", got, want)
	}
}

func TestPlanSpreadsTheSample(t *testing.T) {
	var pods []*podItems
	for i := range 10 {
		pods = append(pods, &podItems{ref: PodRef{Name: fmt.Sprint(i)}})
	}
	names := func(ps []*podItems) (out []string) {
		for _, p := range ps {
			out = append(out, p.ref.Name)
		}
		return out
	}
	for n, want := range map[int][]string{
		0: {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, 4: {"0", "2", "5", "7"}, 10: names(pods), 20: names(pods),
	} {
		if got := names(plan(pods, n)); !slices.Equal(got, want) {
			t.Errorf("plan(%d) = %v, want %v", n, got, want)
		}
	}
}

// The report tells whether PodSandboxStatus answers carry the pod's
// container statuses, as the runtime answered the inspection.
func TestSandboxStatusSupport(t *testing.T) {
	for _, with := range []bool{false, true} {
		s, client := startSim(t, sim.Options{Pods: 2, Containers: 1, SandboxContainerStatuses: with})
		r := diagnose(t, client, Options{Endpoint: s.Endpoint()})
		want := map[bool]Probe{
			false: {Availability: Unsupported, Detail: "no Timestamp, no ContainersStatuses"},
			true:  {Availability: Supported, Detail: "Timestamp and ContainersStatuses set"},
		}[with]
		if got := r.Support.SandboxStatusContainers; got != want {
			t.Errorf("with SandboxContainerStatuses=%v: %+v, want %+v", with, got, want)
		}
	}
}
