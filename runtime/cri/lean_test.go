// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func fullContainers() *runtimeapi.ListContainersResponse {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{
			Id: "c1", PodSandboxId: "s1",
			Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
			Image:    &runtimeapi.ImageSpec{Image: "nginx:1.27", Annotations: map[string]string{"a": "b"}},
			ImageRef: "sha256:abc", ImageId: "sha256:abc",
			State:     runtimeapi.ContainerState_CONTAINER_EXITED,
			CreatedAt: 1_700_000_000_123_456_789,
			Labels: map[string]string{
				"io.kubernetes.pod.uid": "u1", "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "shop",
				"io.kubernetes.container.name": "app", "io.kubernetes.other": "kept", "app": "dropped",
			},
			Annotations: map[string]string{"io.kubernetes.container.restartCount": "3"},
		},
		// Malformed items pass as they are: no metadata, a state CRI does not define.
		{Id: "c2", State: runtimeapi.ContainerState(7)},
		{},
	}}
}

func fullSandboxes() *runtimeapi.ListPodSandboxResponse {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
		{
			Id:        "s1",
			Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "u1", Namespace: "shop", Attempt: 1},
			State:     runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
			CreatedAt: -5, // odd but valid
			Labels:    map[string]string{"io.kubernetes.pod.uid": "u1", "app": "web"}, Annotations: map[string]string{"x": "y"},
			RuntimeHandler: "runc",
		},
		{Id: "s2"},
	}}
}

func roundTrip(t *testing.T, full proto.Message, into proto.Message) {
	t.Helper()
	data, err := proto.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	if err := newLeanCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, into); err != nil {
		t.Fatal(err)
	}
}

func TestLeanContainers(t *testing.T) {
	var got runtimeapi.ListContainersResponse
	roundTrip(t, fullContainers(), &got)
	want := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{
			Id: "c1", PodSandboxId: "s1",
			Metadata:  &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
			State:     runtimeapi.ContainerState_CONTAINER_EXITED,
			CreatedAt: 1_700_000_000_123_456_789,
			Labels: map[string]string{
				"io.kubernetes.pod.uid": "u1", "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "shop",
				"io.kubernetes.container.name": "app", "io.kubernetes.other": "kept",
			},
		},
		{Id: "c2", State: runtimeapi.ContainerState(7)},
		{},
	}}
	if !proto.Equal(&got, want) {
		t.Errorf("lean decode:\n got  %v\n want %v", &got, want)
	}
	// The streamed form is the same message shape.
	var streamed runtimeapi.StreamContainersResponse
	roundTrip(t, fullContainers(), &streamed)
	if !proto.Equal(&runtimeapi.ListContainersResponse{Containers: streamed.Containers}, want) {
		t.Errorf("lean decode of a streamed batch: %v", &streamed)
	}
}

func TestLeanSandboxes(t *testing.T) {
	var got runtimeapi.ListPodSandboxResponse
	roundTrip(t, fullSandboxes(), &got)
	want := &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
		{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "u1", Namespace: "shop", Attempt: 1},
			State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: -5},
		{Id: "s2"},
	}}
	if !proto.Equal(&got, want) {
		t.Errorf("lean decode:\n got  %v\n want %v", &got, want)
	}
}

func TestLeanCodecKeepsStatusesWhole(t *testing.T) {
	for _, full := range []proto.Message{
		&runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}, Image: &runtimeapi.ImageSpec{Image: "nginx"},
			Reason: "Error", ExitCode: 3, Mounts: []*runtimeapi.Mount{{ContainerPath: "/data"}}},
			Info: map[string]string{"info": "{}"}},
		&runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: "s1",
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "u", Namespace: "ns"}, Labels: map[string]string{"app": "web"}}},
		&runtimeapi.VersionResponse{RuntimeName: "containerd"},
	} {
		got := full.ProtoReflect().New().Interface()
		roundTrip(t, full, got)
		if !proto.Equal(got, full) {
			t.Errorf("%T through the lean codec changed: %v", full, got)
		}
	}
}

func TestStatusStringsAreShared(t *testing.T) {
	decode := func() *runtimeapi.ContainerStatus {
		var got runtimeapi.ContainerStatusResponse
		roundTrip(t, &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "c1",
			Labels: map[string]string{"io.kubernetes.pod.namespace": "shop"}, Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}}}, &got)
		return got.Status
	}
	a, b := decode(), decode()
	if unsafe.StringData(a.Image.Image) != unsafe.StringData(b.Image.Image) ||
		unsafe.StringData(a.Labels["io.kubernetes.pod.namespace"]) != unsafe.StringData(b.Labels["io.kubernetes.pod.namespace"]) {
		t.Error("two decoded statuses hold their own copies of the same strings")
	}
}

func TestLeanRejectsBadData(t *testing.T) {
	for name, data := range map[string][]byte{
		"truncated item":   {0x0a, 0x10, 0x0a},
		"bad tag":          {0xff},
		"invalid UTF-8 id": {0x0a, 0x04, 0x0a, 0x02, 0xc3, 0x28},
	} {
		var got runtimeapi.ListContainersResponse
		if err := newLeanCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &got); err == nil {
			t.Errorf("%s: decoded without error: %v", name, &got)
		}
	}
}

// FuzzLeanDecode: whatever a runtime sends, the lean decoder returns items
// or an error, never a panic, and agrees with protobuf on what is valid.
func FuzzLeanDecode(f *testing.F) {
	for _, m := range []proto.Message{fullContainers(), fullSandboxes()} {
		data, _ := proto.Marshal(m)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var lean runtimeapi.ListContainersResponse
		leanErr := newLeanCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &lean)
		var full runtimeapi.ListContainersResponse
		fullErr := proto.Unmarshal(data, &full)
		if leanErr == nil && fullErr == nil && len(lean.Containers) != len(full.Containers) {
			t.Errorf("lean decoded %d items, protobuf %d", len(lean.Containers), len(full.Containers))
		}
		if fullErr == nil && leanErr != nil {
			t.Errorf("protobuf decodes it, the lean codec fails: %v", leanErr)
		}
	})
}

// FuzzLeanDecodeSandboxes: the same for sandbox lists, and every item the
// lean decoder keeps is what protobuf decodes of it.
func FuzzLeanDecodeSandboxes(f *testing.F) {
	for _, m := range []proto.Message{fullSandboxes(), fullContainers()} {
		data, _ := proto.Marshal(m)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var lean runtimeapi.ListPodSandboxResponse
		leanErr := newLeanCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &lean)
		var full runtimeapi.ListPodSandboxResponse
		fullErr := proto.Unmarshal(data, &full)
		if fullErr == nil && leanErr != nil {
			t.Fatalf("protobuf decodes it, the lean codec fails: %v", leanErr)
		}
		if leanErr != nil || fullErr != nil {
			return
		}
		if len(lean.Items) != len(full.Items) {
			t.Fatalf("lean decoded %d items, protobuf %d", len(lean.Items), len(full.Items))
		}
		for i, l := range lean.Items {
			f := full.Items[i]
			// Unknown fields are not kept: compare the known ones.
			lm, fm := l.GetMetadata(), f.GetMetadata()
			if l.Id != f.Id || l.State != f.State || l.CreatedAt != f.CreatedAt || (lm == nil) != (fm == nil) ||
				lm.GetName() != fm.GetName() || lm.GetUid() != fm.GetUid() || lm.GetNamespace() != fm.GetNamespace() || lm.GetAttempt() != fm.GetAttempt() {
				t.Errorf("item %d: lean %v, protobuf %v", i, l, f)
			}
		}
	})
}
