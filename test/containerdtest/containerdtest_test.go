package containerdtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
