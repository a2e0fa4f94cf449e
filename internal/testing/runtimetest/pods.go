// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels and annotations the kubelet puts on CRI objects (pkg/kubelet/types
// and kuberuntime/labels.go), which the PLEG relies on.
const (
	LabelPodUID            = "io.kubernetes.pod.uid"
	LabelPodName           = "io.kubernetes.pod.name"
	LabelPodNamespace      = "io.kubernetes.pod.namespace"
	LabelContainerName     = "io.kubernetes.container.name"
	AnnotationRestartCount = "io.kubernetes.container.restartCount"
)

// PodSpec identifies a pod. Pods always use the host network (there is no
// CNI), and each container gets its own PID namespace, as kubelet does by
// default.
type PodSpec struct {
	UID, Name, Namespace string
	// Attempt is the sandbox attempt (0 for the first sandbox of a pod).
	Attempt uint32
}

// ContainerSpec describes a test container running TestImage. Args replace
// the image's command, i.e. they are the arguments of /testimg:
// {"sleep", "1h"}, {"exit", "3"}, {"crashloop", "1", "2s"}... (see
// test/testimg). Empty Args run the image default, "pause".
type ContainerSpec struct {
	Name    string
	Args    []string
	Attempt uint32 // restart count, also the restartCount annotation
	// Annotations are added to the kubelet's.
	Annotations map[string]string
	// MemoryLimit, in bytes, caps the container's memory and swap, as a
	// pod's limit does; 0 for none.
	MemoryLimit int64
}

func (in *Instance) podLogDir(pod PodSpec) string {
	return filepath.Join(in.Dir, "pods", pod.Namespace+"_"+pod.Name+"_"+pod.UID)
}

// SandboxConfig is the CRI sandbox config RunPod uses for pod.
func (in *Instance) SandboxConfig(pod PodSpec) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Uid: pod.UID, Namespace: pod.Namespace, Attempt: pod.Attempt,
		},
		// No Hostname: with the host network the pod shares the host's UTS
		// namespace and runc refuses to set a hostname ("unable to set
		// hostname without a private UTS namespace"); kubelet leaves it
		// empty for host-network pods too.
		LogDirectory: in.podLogDir(pod),
		Labels: map[string]string{
			LabelPodUID:       pod.UID,
			LabelPodName:      pod.Name,
			LabelPodNamespace: pod.Namespace,
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			// A cgroup parent of our own (cgroupfs driver), so that Stop
			// can find and remove every cgroup of the instance.
			CgroupParent: "/" + cgroupName(in.Dir),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: hostNetwork(),
			},
		},
	}
}

func hostNetwork() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_NODE,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}

// RunPod runs a pod sandbox (the pause image) and returns its id.
func (in *Instance) RunPod(ctx context.Context, pod PodSpec) (string, error) {
	if err := os.MkdirAll(in.podLogDir(pod), 0o755); err != nil {
		return "", err
	}
	resp, err := in.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: in.SandboxConfig(pod)})
	if err != nil {
		return "", fmt.Errorf("RunPodSandbox %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	in.trackSandbox(resp.PodSandboxId)
	return resp.PodSandboxId, nil
}

// CreateContainer creates (does not start) container c in the sandbox of
// pod, which RunPod returned as sandboxID.
func (in *Instance) CreateContainer(
	ctx context.Context,
	sandboxID string,
	pod PodSpec,
	c ContainerSpec,
) (string, error) {
	// The kubelet makes the container's log directory; containerd would
	// make it too, CRI-O's conmon does not.
	if err := os.MkdirAll(filepath.Join(in.podLogDir(pod), c.Name), 0o755); err != nil {
		return "", err
	}
	annotations := maps.Clone(c.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationRestartCount] = strconv.FormatUint(uint64(c.Attempt), 10)
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: c.Attempt},
		// CRI-O refuses a container whose image spec does not say what
		// the user asked for ("cannot verify image signature"); the
		// kubelet always sets it.
		Image:   &runtimeapi.ImageSpec{Image: TestImage, UserSpecifiedImage: TestImage},
		Args:    c.Args,
		LogPath: filepath.Join(c.Name, strconv.FormatUint(uint64(c.Attempt), 10)+".log"),
		Labels: map[string]string{
			LabelPodUID:        pod.UID,
			LabelPodName:       pod.Name,
			LabelPodNamespace:  pod.Namespace,
			LabelContainerName: c.Name,
		},
		Annotations: annotations,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: hostNetwork(),
			},
		},
	}
	if c.MemoryLimit > 0 {
		// Swap as much as memory: none beyond it, so the limit is hit.
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{
			MemoryLimitInBytes: c.MemoryLimit, MemorySwapLimitInBytes: c.MemoryLimit,
		}
	}
	resp, err := in.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  sandboxID,
		Config:        cfg,
		SandboxConfig: in.SandboxConfig(pod),
	})
	if err != nil {
		return "", fmt.Errorf("CreateContainer %s in %s: %w", c.Name, sandboxID, err)
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (in *Instance) StartContainer(ctx context.Context, id string) error {
	if _, err := in.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("StartContainer %s: %w", id, err)
	}
	return nil
}

// RunContainer creates and starts a container and returns its id.
func (in *Instance) RunContainer(ctx context.Context, sandboxID string, pod PodSpec, c ContainerSpec) (string, error) {
	id, err := in.CreateContainer(ctx, sandboxID, pod, c)
	if err != nil {
		return "", err
	}
	return id, in.StartContainer(ctx, id)
}

// StopContainer stops a container: SIGTERM, then SIGKILL after
// timeoutSeconds.
func (in *Instance) StopContainer(ctx context.Context, id string, timeoutSeconds int64) error {
	if _, err := in.Runtime.StopContainer(
		ctx,
		&runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeoutSeconds},
	); err != nil {
		return fmt.Errorf("StopContainer %s: %w", id, err)
	}
	return nil
}

// RemoveContainer removes a container (stopping it first if running).
func (in *Instance) RemoveContainer(ctx context.Context, id string) error {
	if _, err := in.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("RemoveContainer %s: %w", id, err)
	}
	return nil
}

// StopPod stops a pod sandbox and all its containers.
func (in *Instance) StopPod(ctx context.Context, sandboxID string) error {
	if _, err := in.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxID}); err != nil {
		return fmt.Errorf("StopPodSandbox %s: %w", sandboxID, err)
	}
	return nil
}

// RemovePod removes a pod sandbox and its containers.
func (in *Instance) RemovePod(ctx context.Context, sandboxID string) error {
	if _, err := in.Runtime.RemovePodSandbox(
		ctx,
		&runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxID},
	); err != nil {
		return fmt.Errorf("RemovePodSandbox %s: %w", sandboxID, err)
	}
	return nil
}
