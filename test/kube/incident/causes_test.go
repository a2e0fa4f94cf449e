// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package incident

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// cause is one cause of "PLEG is not healthy" and how to bring it about
// on a node of this machine.
type cause struct {
	name string
	// what the fault is, in a line.
	what string
	// inMakeTest: make test runs it, not only make incidents.
	inMakeTest bool
	// alone: its fault shows on the whole machine, not on its node alone
	// (the host's I/O pressure): it runs after the others, by itself, as
	// it would on a node of its own.
	alone bool
	// outcome is what the kubelet does here: turns the node NotReady
	// with "PLEG is not healthy", keeps it Ready for wait, or either
	// (a cause whose effect on the kubelet varies from run to run).
	outcome outcome
	// wait bounds the watch from the fault.
	wait time.Duration
	// findings are the IDs doctor's first finding may have.
	findings []string
	// kubelet, if set, changes the node's kubelet.
	kubelet func(*kubetest.KubeletOptions)
	// prepare, if set, changes the node before the cluster starts.
	prepare func(t *testing.T, n *kubetest.NodeOptions)
	// setup makes the workload on the node before the fault.
	setup func(ctx context.Context, f *fault) error
	// fault applies the fault and returns what lifts it.
	fault func(ctx context.Context, f *fault) (lift func() error, err error)
}

// outcome is what a cause does to the kubelet's node.
type outcome int

const (
	staysReady outcome = iota
	notReady
	either
)

// node is the cause's node.
func (c *cause) node() string { return "incident-" + c.name }

// fault is what a cause's setup and fault work with: its node.
type fault struct {
	t    *testing.T
	env  *env
	node *kubetest.ClusterNode
	dirs nodeDirs
}

// ns is the namespace of the node's workload.
func (f *fault) ns() string { return "work-" + f.node.Name }

// pod creates a pod of the test image on the node, in the node's
// namespace, and waits for it to run when wait is set.
func (f *fault) pod(ctx context.Context, name string, restart corev1.RestartPolicy, args []string, wait bool) error {
	if err := f.ensureNamespace(ctx); err != nil {
		return err
	}
	cs := f.env.cl.CS
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      f.node.Name,
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "main", Image: runtimetest.TestImage, ImagePullPolicy: corev1.PullNever, Args: args,
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(f.ns()).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	return kubetest.WaitFor(ctx, "pod "+name+" running", func() (bool, error) {
		p, err := cs.CoreV1().Pods(f.ns()).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Errorf("phase %s", p.Status.Phase)
	})
}

// causes are every cause the suite knows, in the order of
// docs/incidents.md.
func causes() []*cause {
	return []*cause{
		runtimeStopped(),
		shimStopped(),
		shimStoppedOnDelete(),
		mountHung(),
		diskThrottled(),
		runtimeCPUStarved(),
		kubeletCPUStarved(),
		pidsExhausted(),
		cniHung("add"),
		cniHung("del"),
	}
}

// runtimeStopped: the whole runtime hung, as a deadlock or a stop leaves
// it: containerd stopped with SIGSTOP. Its socket accepts connections,
// nothing answers. The kubelet's runtime check fails first (about two
// minutes in), its PLEG a minute later.
func runtimeStopped() *cause {
	return &cause{
		name:       "runtime-stopped",
		what:       "containerd stopped with SIGSTOP: its socket accepts, nothing answers",
		inMakeTest: true,
		outcome:    notReady,
		wait:       5 * time.Minute,
		findings:   []string{"runtime-stopped"},
		setup: func(ctx context.Context, f *fault) error {
			return f.pod(ctx, "sleeper", corev1.RestartPolicyAlways, []string{"pause"}, true)
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			pid := f.node.Runtime.Pid()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				return nil, err
			}
			return func() error { return syscall.Kill(pid, syscall.SIGCONT) }, nil
		},
	}
}

// diskThrottled: disk I/O saturation below the runtime while a container
// exits: writes of containerd and its shims to the disk under its root
// are throttled with the blkio controller (this machine has no
// device-mapper for a delay target) to 16 bytes a second, and a container
// that was running exits. In the field (containerd #9770, on 1.7) the
// exit's processing held the container's status lock while it waited on
// the disk, and every list waited for that lock. containerd 2.4 answers
// its lists and status calls from memory and takes no lock across the
// disk there: the exit waits (runc delete in D), pods stop starting (each
// metadata commit waits on the disk), the kubelet's PLEG stays healthy.
func diskThrottled() *cause {
	return &cause{
		name:     "disk-throttled",
		what:     "containerd's and its shims' writes throttled to 16 bytes a second (blkio), then a running container exits",
		alone:    true,
		outcome:  staysReady,
		wait:     stayReady,
		findings: []string{"disk-saturated"},
		setup: func(ctx context.Context, f *fault) error {
			// Running when the throttle comes, exiting 30 s later.
			return f.pod(ctx, "leaving", corev1.RestartPolicyNever, []string{"exit", "0", "40s"}, true)
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			return throttleRuntime(f.node.Runtime, 16)
		},
	}
}

// resizable creates a running pod whose CPU the kubelet can resize in
// place.
func (f *fault) resizable(ctx context.Context, name string) error {
	if err := f.ensureNamespace(ctx); err != nil {
		return err
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName: f.node.Name, RestartPolicy: corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](2), AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "main", Image: runtimetest.TestImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
				},
				ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}},
			}},
		},
	}
	cs := f.env.cl.CS
	if _, err := cs.CoreV1().Pods(f.ns()).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	return kubetest.WaitFor(ctx, "pod "+name+" running", func() (bool, error) {
		p, err := cs.CoreV1().Pods(f.ns()).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Errorf("phase %s", p.Status.Phase)
	})
}

// resize asks for the pod's CPU limit to change in place (the resize
// subresource, kubectl patch --subresource resize): the kubelet applies
// it with the CRI's UpdateContainerResources.
func (f *fault) resize(ctx context.Context, pod, cpu string) error {
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","resources":{"limits":{"cpu":%q}}}]}}`, cpu)
	_, err := f.env.cl.CS.CoreV1().Pods(f.ns()).Patch(ctx, pod, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{}, "resize")
	return err
}

// runtimeCPUStarved: the runtime starved of CPU below the CRI, as a
// runtime confined to a cgroup whose quota its node's load exhausts: here
// containerd and its shims are given 1 ms of CPU a second (the smallest
// quota the kernel takes, 0.1% of a core). Its calls still answer now and
// then, in seconds to minutes: the kubelet turned the node NotReady in
// one run, kept it Ready in another.
func runtimeCPUStarved() *cause {
	return &cause{
		name:     "runtime-cpu-starved",
		what:     "containerd and its shims confined to 1 ms of CPU a second (cpu cgroup quota)",
		outcome:  either,
		wait:     7 * time.Minute,
		findings: []string{"runtime-cpu-starved"},
		setup: func(ctx context.Context, f *fault) error {
			return f.pod(ctx, "sleeper", corev1.RestartPolicyAlways, []string{"pause"}, true)
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			return starveRuntime(f.node.Runtime, 1000)
		},
	}
}

// kubeletCPUStarved: the kubelet starved of CPU, as on a node whose
// system daemons' reservation is too small for its pods' churn, or a
// kubelet confined by a cgroup the node's load exhausts: here the kubelet
// alone is given 2 ms of CPU a second. The runtime answers every call at
// once: only the kubelet's own PLEG, read from its metrics, and its
// process's throttling tell. The kubelet's relist and its node status
// both starve, so which of its checks or the node controller's fails
// first varies.
func kubeletCPUStarved() *cause {
	return &cause{
		name:     "kubelet-cpu-starved",
		what:     "the kubelet alone confined to 2 ms of CPU a second (cpu cgroup quota)",
		outcome:  either,
		wait:     7 * time.Minute,
		findings: []string{"kubelet-starved", "kubelet-pleg-behind"},
		setup: func(ctx context.Context, f *fault) error {
			return f.pod(ctx, "sleeper", corev1.RestartPolicyAlways, []string{"pause"}, true)
		},
		fault: func(ctx context.Context, f *fault) (func() error, error) {
			pid := f.node.Kubelet.Pid()
			return confine("cpu", "kubelet", pid, []int{pid},
				[][2]string{{"cpu.cfs_period_us", "1000000"}, {"cpu.cfs_quota_us", "2000"}},
				[][2]string{{"cpu.cfs_quota_us", "-1"}})
		},
	}
}

// cgroupPrefix names, in each controller's hierarchy, the cgroups the
// faults put a runtime's processes in.
const cgroupPrefix = "pleg-incident-"

// confinement is a cgroup of one controller that holds a runtime's
// processes under limits: the fault of a cause below the CRI.
type confinement struct {
	dir string
	// lift are the settings that lift the limits, written before the
	// processes leave, so that what waits on them drains.
	lift [][2]string
}

// sweepConfinements lifts and removes every confinement a run that died
// left (its processes would stay throttled, some in D, unkillable, or
// starved).
func sweepConfinements() error {
	var errs []error
	for _, c := range []struct {
		controller string
		lift       func(dir string) [][2]string
	}{
		{"blkio", func(dir string) [][2]string {
			var out [][2]string
			rules, _ := os.ReadFile(filepath.Join(dir, "blkio.throttle.write_bps_device"))
			for _, line := range strings.Split(strings.TrimSpace(string(rules)), "\n") {
				if f := strings.Fields(line); len(f) == 2 {
					out = append(out, [2]string{"blkio.throttle.write_bps_device", f[0] + " 0"},
						[2]string{"blkio.throttle.write_iops_device", f[0] + " 0"})
				}
			}
			return out
		}},
		{"cpu", func(string) [][2]string { return [][2]string{{"cpu.cfs_quota_us", "-1"}} }},
	} {
		dirs, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", c.controller, cgroupPrefix+"*"))
		if err != nil {
			return err
		}
		for _, dir := range dirs {
			errs = append(errs, confinement{dir: dir, lift: c.lift(dir)}.release())
		}
	}
	return errors.Join(errs...)
}

// confineRuntime moves the runtime and every process below it (its shims,
// their containers' runtimes) into a cgroup of controller's hierarchy
// with settings, and returns what releases them.
func confineRuntime(in *runtimetest.Instance, controller string, settings, lift [][2]string) (func() error, error) {
	return confine(controller, "runtime", in.Pid(), runtimeProcesses(in), settings, lift)
}

// confine moves pids into a cgroup of the controller under settings,
// named after whose and its first process; what it returns lifts lift,
// moves them out and removes the cgroup.
func confine(controller, whose string, first int, pids []int, settings, lift [][2]string) (func() error, error) {
	c := confinement{dir: filepath.Join("/sys/fs/cgroup", controller, cgroupPrefix+strconv.Itoa(first)), lift: lift}
	if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%s cgroup: %w", controller, err)
	}
	for _, kv := range settings {
		if err := os.WriteFile(filepath.Join(c.dir, kv[0]), []byte(kv[1]), 0o644); err != nil {
			return nil, errors.Join(fmt.Errorf("%s %q: %w", kv[0], kv[1], err), c.release())
		}
	}
	moved := 0
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err == nil {
			moved++
		}
	}
	if moved == 0 {
		return nil, errors.Join(fmt.Errorf("no process of the %s moved into %s", whose, c.dir), c.release())
	}
	return c.release, nil
}

// release lifts the limits, moves the processes back to the hierarchy's
// root and removes the cgroup.
func (c confinement) release() error {
	var errs []error
	for _, kv := range c.lift {
		errs = append(errs, os.WriteFile(filepath.Join(c.dir, kv[0]), []byte(kv[1]), 0o644))
	}
	root := filepath.Dir(c.dir)
	procs, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	for _, pid := range strings.Fields(string(procs)) {
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0o644) // gone already is as good
	}
	// The cgroup empties once its last exiting process is gone.
	deadline := time.Now().Add(time.Minute)
	for {
		err := syscall.Rmdir(c.dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", c.dir, err))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// throttleRuntime throttles the writes of the runtime and every process
// below it to the disk under the runtime's directory to bps bytes (and
// one write) a second.
func throttleRuntime(in *runtimetest.Instance, bps int) (func() error, error) {
	dev, err := diskOf(in.Dir)
	if err != nil {
		return nil, err
	}
	return confineRuntime(in, "blkio",
		[][2]string{{"blkio.throttle.write_bps_device", fmt.Sprintf("%s %d", dev, bps)},
			{"blkio.throttle.write_iops_device", dev + " 1"}},
		[][2]string{{"blkio.throttle.write_bps_device", dev + " 0"}, {"blkio.throttle.write_iops_device", dev + " 0"}})
}

// starveRuntime gives the runtime and every process below it a CPU
// quota of quota microseconds a second.
func starveRuntime(in *runtimetest.Instance, quota int) (func() error, error) {
	return confineRuntime(in, "cpu",
		[][2]string{{"cpu.cfs_period_us", "1000000"}, {"cpu.cfs_quota_us", strconv.Itoa(quota)}},
		[][2]string{{"cpu.cfs_quota_us", "-1"}})
}

// diskOf is the major:minor of the whole disk that holds path: blkio
// throttles at the disk, not the partition.
func diskOf(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	maj, minor := (st.Dev>>8)&0xfff, (st.Dev&0xff)|((st.Dev>>12)&0xfff00)
	// A partition's sysfs entry has a "partition" file; its disk is its
	// parent directory.
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", maj, minor)
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		resolved, err := filepath.EvalSymlinks(sys)
		if err != nil {
			return "", err
		}
		dev, err := os.ReadFile(filepath.Join(filepath.Dir(resolved), "dev"))
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(dev)), nil
	}
	if _, err := os.Stat(sys); err != nil {
		return "", fmt.Errorf("%s is on no block device (%d:%d): %w", path, maj, minor, err)
	}
	return fmt.Sprintf("%d:%d", maj, minor), nil
}

// runtimeProcesses are the runtime's process and the processes of its own
// that run from its directory: its shims, and the runc processes they
// start, which containerd starts detached. Not the pods' processes, nor
// whatever merely names the runtime's socket (pleg's own daemon does).
func runtimeProcesses(in *runtimetest.Instance) []int {
	out := []int{in.Pid()}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == in.Pid() {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		switch filepath.Base(args[0]) {
		case "containerd-shim-runc-v2", "runc":
			if strings.Contains(string(cmd), in.Dir) {
				out = append(out, pid)
			}
		}
	}
	return out
}
