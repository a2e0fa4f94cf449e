package containerdtest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestInstanceLifecycle(t *testing.T) {
	t0 := time.Now()
	in := Require(t)
	t.Logf("Start took %v", time.Since(t0).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pod := PodSpec{UID: "uid-1", Name: "pod-1", Namespace: "default"}
	sb, err := in.RunPod(ctx, pod)
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	sleeper, err := in.RunContainer(ctx, sb, pod, ContainerSpec{Name: "sleeper", Args: []string{"sleep", "1h"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	exiter, err := in.RunContainer(ctx, sb, pod, ContainerSpec{Name: "exiter", Args: []string{"exit", "3"}, Attempt: 2})
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}

	// The exiter exits at once; wait for containerd to notice.
	waitState(ctx, t, in, exiter, runtimeapi.ContainerState_CONTAINER_EXITED)
	states := listStates(ctx, t, in)
	if got := states[sleeper]; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("sleeper state = %v, want RUNNING", got)
	}
	if got := states[exiter]; got != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("exiter state = %v, want EXITED", got)
	}
	st, err := in.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: exiter})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Status.ExitCode; got != 3 {
		t.Errorf("exiter exit code = %d, want 3", got)
	}
	if got := st.Status.Labels[LabelContainerName]; got != "exiter" {
		t.Errorf("exiter container-name label = %q", got)
	}
	if got := st.Status.Annotations[AnnotationRestartCount]; got != "2" {
		t.Errorf("exiter restartCount annotation = %q, want 2", got)
	}
	if got := st.Status.Labels[LabelPodUID]; got != pod.UID {
		t.Errorf("exiter pod uid label = %q", got)
	}

	// Crash containerd; the shims keep the containers alive.
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Runtime.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		t.Errorf("CRI answered while containerd was killed")
	}
	t1 := time.Now()
	if err := in.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Restart took %v", time.Since(t1).Round(time.Millisecond))
	states = listStates(ctx, t, in)
	if got := states[sleeper]; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after restart, sleeper state = %v, want RUNNING", got)
	}
	if got := states[exiter]; got != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("after restart, exiter state = %v, want EXITED", got)
	}

	// Container logs land at LogDirectory/LogPath (CRI log format).
	logFile := filepath.Join(in.podLogDir(pod), "exiter", "2.log")
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), "testimg: exit 3") {
		t.Errorf("container log %s = %q, %v; want the testimg banner", logFile, b, err)
	}

	dir := in.Dir
	t2 := time.Now()
	if err := in.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(t2).Round(time.Millisecond))
	if err := in.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if ps := procsReferring(dir); len(ps) > 0 {
		t.Errorf("processes still refer to %s: %v", dir, ps)
	}
	if mps, err := mountsBelow(dir); err != nil || len(mps) > 0 {
		t.Errorf("mounts remain below %s: %v (%v)", dir, mps, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
}

// TestKillThenStop checks that Stop cleans up after a crash without a
// restart: the shims and containers are left to Stop's process sweep.
func TestKillThenStop(t *testing.T) {
	in := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pod := PodSpec{UID: "uid-2", Name: "pod-2", Namespace: "default"}
	sb, err := in.RunPod(ctx, pod)
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	if _, err := in.RunContainer(ctx, sb, pod, ContainerSpec{Name: "c", Args: []string{"sleep", "1h"}}); err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	dir := in.Dir
	if err := in.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if ps := procsReferring(dir); len(ps) > 0 {
		t.Errorf("processes still refer to %s: %v", dir, ps)
	}
	if mps, _ := mountsBelow(dir); len(mps) > 0 {
		t.Errorf("mounts remain below %s: %v", dir, mps)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
}

func TestRefersTo(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want bool
	}{
		{"/tmp/pleg-ctd-1", true},
		{"/tmp/pleg-ctd-1/c.sock", true},
		{"unix:///tmp/pleg-ctd-1/c.sock", true},
		{"--root=/tmp/pleg-ctd-1/root", true},
		{"/tmp/pleg-ctd-12/c.sock", false},
		{"/tmp/pleg-ctd-12/x/tmp/pleg-ctd-1/y", true},
		{"sleep", false},
	} {
		if got := refersTo(c.arg, "/tmp/pleg-ctd-1"); got != c.want {
			t.Errorf("refersTo(%q) = %v, want %v", c.arg, got, c.want)
		}
	}
	if got := unescapeMountinfo(`/a\040b`); got != "/a b" {
		t.Errorf("unescape = %q", got)
	}
}

func waitState(ctx context.Context, t *testing.T, in *Instance, id string, want runtimeapi.ContainerState) {
	t.Helper()
	for {
		st, err := in.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err == nil && st.Status.State == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("container %s did not reach %v (last %v, %v)", id, want, st.GetStatus().GetState(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func listStates(ctx context.Context, t *testing.T, in *Instance) map[string]runtimeapi.ContainerState {
	t.Helper()
	resp, err := in.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]runtimeapi.ContainerState{}
	for _, c := range resp.Containers {
		m[c.Id] = c.State
	}
	return m
}

// TestLegacyLifecycle runs Debian's containerd 1.6 and checks that it
// works like the v2 instance through CRI, and that it does not implement
// GetContainerEvents, which is why tests use it.
func TestLegacyLifecycle(t *testing.T) {
	t0 := time.Now()
	in := RequireLegacy(t)
	t.Logf("StartLegacy took %v", time.Since(t0).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if !in.Legacy || !strings.HasPrefix(in.Version, LegacyVersionPrefix) {
		t.Fatalf("Legacy = %v, Version = %q; want a %sx instance", in.Legacy, in.Version, LegacyVersionPrefix)
	}
	v, err := in.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CRI Version: %s %s (CRI %s)", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
	if !strings.HasPrefix(strings.TrimPrefix(v.RuntimeVersion, "v"), LegacyVersionPrefix) {
		t.Errorf("runtime version = %q, want %sx", v.RuntimeVersion, LegacyVersionPrefix)
	}
	// containerd must run Debian's 1.6 shim, not the cache's v2.2.1 one.
	if shim := in.Bin.Shim; shim != filepath.Join(LegacyBinDir, "containerd-shim-runc-v2") {
		t.Errorf("Bin.Shim = %s", shim)
	}

	// What the PLEG relies on: GetContainerEvents is Unimplemented. It is
	// a server stream, so the status comes with the first Recv.
	ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
	stream, err := in.Runtime.GetContainerEvents(ectx, &runtimeapi.GetEventsRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	ecancel()
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("GetContainerEvents on containerd %s: %v (code %v), want codes.Unimplemented", in.Version, err, status.Code(err))
	}

	pod := PodSpec{UID: "uid-l1", Name: "pod-l1", Namespace: "default"}
	sb, err := in.RunPod(ctx, pod)
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	sleeper, err := in.RunContainer(ctx, sb, pod, ContainerSpec{Name: "sleeper", Args: []string{"sleep", "1h"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	exiter, err := in.RunContainer(ctx, sb, pod, ContainerSpec{Name: "exiter", Args: []string{"exit", "3"}, Attempt: 1})
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	waitState(ctx, t, in, exiter, runtimeapi.ContainerState_CONTAINER_EXITED)
	if shims := shimsOf(in.Dir); len(shims) == 0 {
		t.Errorf("no shim refers to %s", in.Dir)
	} else {
		for _, exe := range shims {
			if exe != in.Bin.Shim {
				t.Errorf("containerd 1.6 runs the shim %s, want %s", exe, in.Bin.Shim)
			}
		}
	}
	states := listStates(ctx, t, in)
	if got := states[sleeper]; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("sleeper state = %v, want RUNNING", got)
	}
	if got := states[exiter]; got != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("exiter state = %v, want EXITED", got)
	}
	st, err := in.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: exiter})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Status.ExitCode; got != 3 {
		t.Errorf("exiter exit code = %d, want 3", got)
	}
	if got := st.Status.Labels[LabelContainerName]; got != "exiter" {
		t.Errorf("exiter container-name label = %q", got)
	}
	if got := st.Status.Annotations[AnnotationRestartCount]; got != "1" {
		t.Errorf("exiter restartCount annotation = %q, want 1", got)
	}
	pods, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Id != sb || pods.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || pods.Items[0].Labels[LabelPodUID] != pod.UID {
		t.Errorf("ListPodSandbox = %v, want the ready sandbox %s", pods.Items, sb)
	}

	// Crash and restart, as with v2.
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := in.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	states = listStates(ctx, t, in)
	if got := states[sleeper]; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after restart, sleeper state = %v, want RUNNING", got)
	}
	if got := states[exiter]; got != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("after restart, exiter state = %v, want EXITED", got)
	}
	logFile := filepath.Join(in.podLogDir(pod), "exiter", "1.log")
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), "testimg: exit 3") {
		t.Errorf("container log %s = %q, %v; want the testimg banner", logFile, b, err)
	}

	// Stop and remove one container through the API, then Stop the rest.
	if err := in.StopContainer(ctx, sleeper, 1); err != nil {
		t.Fatal(err)
	}
	if err := in.RemoveContainer(ctx, sleeper); err != nil {
		t.Fatal(err)
	}
	if _, ok := listStates(ctx, t, in)[sleeper]; ok {
		t.Errorf("sleeper still listed after RemoveContainer")
	}
	dir := in.Dir
	t1 := time.Now()
	if err := in.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(t1).Round(time.Millisecond))
	checkGone(t, dir)
}

// TestLegacyKillThenStop is TestKillThenStop on containerd 1.6.
func TestLegacyKillThenStop(t *testing.T) {
	in := RequireLegacy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pod := PodSpec{UID: "uid-l2", Name: "pod-l2", Namespace: "default"}
	sb, err := in.RunPod(ctx, pod)
	if err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	if _, err := in.RunContainer(ctx, sb, pod, ContainerSpec{Name: "c", Args: []string{"sleep", "1h"}}); err != nil {
		t.Fatalf("%v\n%s", err, in.LogTail(20))
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	dir := in.Dir
	if err := in.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	checkGone(t, dir)
}

// checkGone checks that nothing of the instance in dir is left: processes
// referring to it, mounts below it, its cgroups, the directory.
func checkGone(t *testing.T, dir string) {
	t.Helper()
	if ps := procsReferring(dir); len(ps) > 0 {
		t.Errorf("processes still refer to %s: %v", dir, ps)
	}
	if mps, err := mountsBelow(dir); err != nil || len(mps) > 0 {
		t.Errorf("mounts remain below %s: %v (%v)", dir, mps, err)
	}
	if cgs := cgroupDirs(cgroupName(dir)); len(cgs) > 0 {
		t.Errorf("cgroups remain: %v", cgs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
}

// shimsOf returns the executables of the shims serving the instance in dir.
func shimsOf(dir string) []string {
	var out []string
	for _, p := range procsReferring(dir) {
		if p.shimID == "" {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.pid), "exe")); err == nil {
			out = append(out, exe)
		}
	}
	return out
}
