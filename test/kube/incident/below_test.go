// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package incident

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// The causes below the CRI that containerd 2.x keeps from its lists and
// status calls: the kubelet's PLEG does not see them, so the node stays
// Ready while the pods they touch are stuck. Each shows how long the node
// stayed Ready, and what pleg saw.

// stayReady is how long a cause that leaves the node Ready is watched:
// past the kubelet's 3 minute PLEG threshold, from the kubelet's first
// call that hangs.
const stayReady = 4 * time.Minute

// shimStopped: one pod's shim stopped (SIGSTOP) while the kubelet acts on
// the pod. The kubelet resizes the pod in place: containerd's
// UpdateContainerResources holds the container's status lock while it
// asks the shim, which does not answer, and every list waits for that
// lock (containerd #9770, where the shim was stuck in umount). containerd
// 2.4 asks the shim for the task's state with a timeout of its own (2 s)
// and gives the lock back: the resize fails, the lists answer, the node
// stays Ready.
func shimStopped() *cause {
	return &cause{
		name:       "shim-stopped",
		what:       "the shim of pod resized stopped with SIGSTOP, then the pod resized in place",
		inMakeTest: true,
		outcome:    staysReady,
		wait:       stayReady,
		findings:   []string{"shim-stopped"},
		setup: func(ctx context.Context, f *fault) error {
			return f.resizable(ctx, "resized")
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			pid, err := f.stopShim(ctx, "resized")
			if err != nil {
				return nil, err
			}
			lift := func() error { return syscall.Kill(pid, syscall.SIGCONT) }
			return lift, f.resize(ctx, "resized", "300m")
		},
	}
}

// shimStoppedOnDelete: one pod's shim stopped while the kubelet deletes the
// pod: StopContainer waits on the shim without a lock the lists need, so
// the pod stays Terminating and the node Ready.
func shimStoppedOnDelete() *cause {
	return &cause{
		name:     "shim-stopped-delete",
		what:     "the shim of pod victim stopped with SIGSTOP, then the pod deleted",
		wait:     stayReady,
		findings: []string{"shim-stopped"},
		setup: func(ctx context.Context, f *fault) error {
			return f.pod(ctx, "victim", corev1.RestartPolicyAlways, []string{"pause"}, true)
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			pid, err := f.stopShim(ctx, "victim")
			if err != nil {
				return nil, err
			}
			lift := func() error { return syscall.Kill(pid, syscall.SIGCONT) }
			return lift, f.env.cl.CS.CoreV1().Pods(f.ns()).Delete(ctx, "victim", metav1.DeleteOptions{})
		},
	}
}

// stopShim stops (SIGSTOP) the shim of the pod's sandbox and returns its
// pid.
func (f *fault) stopShim(ctx context.Context, pod string) (int, error) {
	id, err := f.sandboxOf(ctx, pod)
	if err != nil {
		return 0, err
	}
	pid, err := f.shimOf(id)
	if err != nil {
		return 0, err
	}
	return pid, syscall.Kill(pid, syscall.SIGSTOP)
}

// sandboxOf is the ID of the pod's sandbox in the node's runtime.
func (f *fault) sandboxOf(ctx context.Context, pod string) (string, error) {
	resp, err := f.node.Runtime.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
		Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{
			"io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": f.ns(),
		}},
	})
	if err != nil {
		return "", err
	}
	for _, sb := range resp.GetItems() {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return sb.GetId(), nil
		}
	}
	return "", fmt.Errorf("no ready sandbox of pod %s/%s", f.ns(), pod)
}

// shimOf is the pid of the shim that serves the sandbox id.
func (f *fault) shimOf(id string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if strings.HasSuffix(args[0], "containerd-shim-runc-v2") && strings.Contains(string(cmd), id) &&
			strings.Contains(string(cmd), f.node.Runtime.Dir) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no shim of sandbox %s", id)
}

// mountHung: a FUSE mount under a pod whose server stops answering, as a
// hung NFS or CephFS mount: bindfs (Debian's) serves a directory and is
// stopped (SIGSTOP); a pod then mounts it as a hostPath volume.
func mountHung() *cause {
	var src, mnt string
	var server *exec.Cmd
	return &cause{
		name:     "mount-hung",
		what:     "a FUSE mount (bindfs) whose server is stopped, mounted into a new pod as a hostPath volume",
		wait:     stayReady,
		findings: []string{"mount-hung"},
		setup: func(ctx context.Context, f *fault) error {
			bindfs, err := runtimetest.HostBinary(ctx, "bindfs", "bindfs", f.t.Logf)
			if err != nil {
				return err
			}
			dir := f.t.TempDir()
			src, mnt = filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
			for _, d := range []string{src, mnt} {
				if err := os.Mkdir(d, 0o755); err != nil {
					return err
				}
			}
			// In the foreground, so that this test holds the server's
			// process and can stop it.
			server = exec.Command(bindfs, "-f", src, mnt)
			server.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := server.Start(); err != nil {
				return err
			}
			f.t.Cleanup(func() { unmountFUSE(f.t, mnt, server) })
			return kubetest.WaitFor(ctx, "the FUSE mount", func() (bool, error) {
				return isMountPoint(mnt), nil
			})
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			if err := server.Process.Signal(syscall.SIGSTOP); err != nil {
				return nil, err
			}
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "on-the-mount"},
				Spec: corev1.PodSpec{
					NodeName: f.node.Name, RestartPolicy: corev1.RestartPolicyAlways,
					TerminationGracePeriodSeconds: ptr.To[int64](2), AutomountServiceAccountToken: ptr.To(false),
					Containers: []corev1.Container{{
						Name: "main", Image: runtimetest.TestImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: mnt},
					}}},
				},
			}
			if err := f.ensureNamespace(ctx); err != nil {
				return nil, err
			}
			if _, err := f.env.cl.CS.CoreV1().Pods(f.ns()).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				_ = server.Process.Signal(syscall.SIGCONT)
				return nil, err
			}
			return func() error { return server.Process.Signal(syscall.SIGCONT) }, nil
		},
	}
}

// isMountPoint tells whether path is a mount point, from the mount table.
func isMountPoint(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// unmountFUSE ends the FUSE mount whatever state its server is in: the
// server resumed, the mount lazily detached, the server ended, and as a
// last resort the connection aborted through fusectl.
func unmountFUSE(t *testing.T, mnt string, server *exec.Cmd) {
	_ = server.Process.Signal(syscall.SIGCONT)
	if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		t.Logf("unmount %s: %v", mnt, err)
	}
	_ = server.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = server.Wait() // the server's exit status says nothing here
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = server.Process.Kill()
		<-done
	}
}

// cniHung: the CNI plugin hangs on ADD (a new pod's network setup) or on
// DEL (a deleted pod's teardown): the node's bridge plugin is a wrapper
// that waits while a file exists, then runs the real one.
func cniHung(cmd string) *cause {
	var dir string
	name := "cni-hung-" + cmd
	c := &cause{
		name:     name,
		what:     "the CNI bridge plugin waits forever on " + strings.ToUpper(cmd),
		wait:     stayReady,
		findings: []string{"cni-plugin-hung"},
		prepare: func(t *testing.T, n *kubetest.NodeOptions) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			plugins, err := runtimetest.CNIPlugins(ctx, t.Logf)
			if err != nil {
				kubetest.NodeUnavailable(t, err)
			}
			dir = t.TempDir()
			if err := wrapCNI(plugins, dir); err != nil {
				t.Fatal(err)
			}
			n.CNIBinDir = dir
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			hang := filepath.Join(dir, "hang-"+strings.ToUpper(cmd))
			if err := os.WriteFile(hang, nil, 0o644); err != nil {
				return nil, err
			}
			lift := func() error { return os.Remove(hang) }
			if cmd == "add" {
				return lift, f.pod(ctx, "no-network", corev1.RestartPolicyAlways, []string{"pause"}, false)
			}
			return lift, f.env.cl.CS.CoreV1().Pods(f.ns()).Delete(ctx, "doomed", metav1.DeleteOptions{})
		},
	}
	if cmd == "del" {
		c.setup = func(ctx context.Context, f *fault) error {
			return f.pod(ctx, "doomed", corev1.RestartPolicyAlways, []string{"pause"}, true)
		}
	}
	return c
}

// wrapCNI fills dir with the plugins in plugins, the bridge plugin wrapped:
// while dir/hang-ADD (or hang-DEL) exists, an ADD (or DEL) waits, as a
// plugin that hangs; then it runs the real bridge.
func wrapCNI(plugins, dir string) error {
	ents, err := os.ReadDir(plugins)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == "bridge" {
			continue
		}
		if err := os.Symlink(filepath.Join(plugins, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	script := `#!/bin/sh
# The bridge plugin, made to hang on the test's word (test/kube/incident).
while [ -e "` + dir + `/hang-$CNI_COMMAND" ]; do sleep 1; done
exec "` + filepath.Join(plugins, "bridge") + `" "$@"
`
	return os.WriteFile(filepath.Join(dir, "bridge"), []byte(script), 0o755)
}

// ensureNamespace creates the node's workload namespace and waits for its
// default service account.
func (f *fault) ensureNamespace(ctx context.Context) error {
	return kubetest.EnsureNamespace(ctx, f.env.cl.CS, f.ns())
}

// pidsExhausted: PID exhaustion from a bounded fork pod without a PID
// limit of its own. The node's pods share a PID limit, here on their
// kubepods cgroup, where the kubelet puts what its node allocatable
// leaves them (--system-reserved=pid=N), set to what they use plus 100: a
// pod that forks takes them all, and the next pod's container cannot
// start (runc cannot fork in its cgroup). The runtime and the kubelet are
// outside that limit: on a node whose pid_max runs out they fail to fork
// too (not brought about here: pid_max is this whole machine's).
func pidsExhausted() *cause {
	var limit string
	return &cause{
		name:     "pids-exhausted",
		what:     "the pods' PIDs (kubepods) limited to their use plus 100, then a pod forks until none is left",
		wait:     stayReady,
		findings: []string{"pids-exhausted", "pod-pids-limit"},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			limit = filepath.Join("/sys/fs/cgroup/pids", f.node.Kubelet.CgroupRoot(), "kubepods", "pids.max")
			cur, err := os.ReadFile(filepath.Join(filepath.Dir(limit), "pids.current"))
			if err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(cur)))
			if err != nil {
				return nil, fmt.Errorf("pids.current %q: %w", cur, err)
			}
			if err := os.WriteFile(limit, []byte(strconv.Itoa(n+100)), 0o644); err != nil {
				return nil, err
			}
			lift := func() error {
				err := os.WriteFile(limit, []byte("max"), 0o644)
				return errors.Join(err, f.env.cl.CS.CoreV1().Pods(f.ns()).Delete(ctx, "forker", metav1.DeleteOptions{}))
			}
			if err := f.pod(ctx, "forker", corev1.RestartPolicyNever, []string{"forks", "2000"}, true); err != nil {
				return lift, err
			}
			return lift, f.pod(ctx, "late", corev1.RestartPolicyAlways, []string{"pause"}, false)
		},
	}
}
