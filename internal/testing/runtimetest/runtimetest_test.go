// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
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

func TestMain(m *testing.M) {
	if err := RunAllAtOnce(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// specs are the runtimes of the run (see Matrix), and Debian's containerd
// 1.6.
func specs(t *testing.T) []Spec {
	t.Helper()
	m, err := Matrix()
	if err != nil {
		t.Fatal(err)
	}
	return append(m, Spec{Kind: Containerd, Version: DebianContainerd16})
}

// forEach runs f for every spec, in parallel, each in a subtest named
// after it.
func forEach(t *testing.T, f func(t *testing.T, spec Spec)) {
	for _, spec := range specs(t) {
		t.Run(spec.String(), func(t *testing.T) {
			t.Parallel()
			f(t, spec)
		})
	}
}

// TestInstanceLifecycle runs each runtime through what the end-to-end
// tests need of it: pods and containers through CRI with the kubelet's
// labels and annotations, exit codes, logs, the event stream it is meant
// to have or not, a crash and restart with the containers kept, and a
// clean Stop.
func TestInstanceLifecycle(t *testing.T) {
	forEach(t, func(t *testing.T, spec Spec) {
		t0 := time.Now()
		in := Require(t, spec)
		t.Logf("Start took %v", time.Since(t0).Round(time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()

		v, err := in.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("CRI Version: %s %s (CRI %s)", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
		wantName := map[Kind]string{Containerd: "containerd", CRIO: "cri-o"}[spec.Kind]
		// A build from the module has no commit to add: 1.7.35+unknown.
		got, _, _ := strings.Cut(strings.TrimPrefix(v.RuntimeVersion, "v"), "+")
		if v.RuntimeName != wantName || got != strings.TrimPrefix(in.Version, "v") {
			t.Errorf("runtime %s %s, want %s %s", v.RuntimeName, v.RuntimeVersion, wantName, in.Version)
		}
		checkEventStream(ctx, t, in)

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

		// The exiter exits at once; wait for the runtime to notice.
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
		pods, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 || pods.Items[0].Id != sb || pods.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || pods.Items[0].Labels[LabelPodUID] != pod.UID {
			t.Errorf("ListPodSandbox = %v, want the ready sandbox %s", pods.Items, sb)
		}
		if spec.Version == DebianContainerd16 {
			// containerd must run Debian's 1.6 shim, not one of the cache's.
			for _, exe := range shimsOf(in.Dir) {
				if exe != in.Bin.Shim {
					t.Errorf("containerd 1.6 runs the shim %s, want %s", exe, in.Bin.Shim)
				}
			}
		}

		// Crash the runtime; shims or conmons keep the containers alive.
		if err := in.Kill(); err != nil {
			t.Fatal(err)
		}
		if _, err := in.Runtime.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
			t.Errorf("CRI answered while the runtime was killed")
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
		t2 := time.Now()
		if err := in.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		t.Logf("Stop took %v", time.Since(t2).Round(time.Millisecond))
		if err := in.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		checkGone(t, dir)
	})
}

// checkEventStream checks the runtime has the event stream it is meant
// to: Debian's containerd 1.6 answers Unimplemented, CRI-O without pod
// events ends the stream at once, the others keep it open.
func checkEventStream(ctx context.Context, t *testing.T, in *Instance) {
	t.Helper()
	ectx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	stream, err := in.Runtime.GetContainerEvents(ectx, &runtimeapi.GetEventsRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	switch {
	case in.Spec.Version == DebianContainerd16:
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("GetContainerEvents: %v, want Unimplemented", err)
		}
	case in.Spec.NoPodEvents:
		if !errors.Is(err, io.EOF) || ectx.Err() != nil {
			t.Errorf("GetContainerEvents: %v, want a stream that ends at once", err)
		}
	default:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("GetContainerEvents: %v, want a stream open until our deadline", err)
		}
	}
}

// TestKillThenStop checks that Stop cleans up after a crash without a
// restart: the shims or conmons and containers are left to Stop's process
// sweep.
func TestKillThenStop(t *testing.T) {
	forEach(t, func(t *testing.T, spec Spec) {
		in := Require(t, spec)
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
		checkGone(t, dir)
	})
}

func TestMatrix(t *testing.T) {
	for _, tc := range []struct {
		ctd, crio string
		want      []string
		err       string
	}{
		{want: []string{"containerd-v1.7.35", "containerd-v2.4.2", "crio-v1.36.3", "crio-v1.36.3-nopodevents"}},
		{ctd: "2.2.1, v1.7.30,2.2.1", crio: "none", want: []string{"containerd-v2.2.1", "containerd-v1.7.30"}},
		{ctd: "none", crio: "1.34.0", want: []string{"crio-v1.34.0", "crio-v1.34.0-nopodevents"}},
		{ctd: "all", crio: "none", want: []string{"containerd-v1.7.35", "containerd-v2.0.2", "containerd-v2.0.14", "containerd-v2.1.5", "containerd-v2.2.9", "containerd-v2.3.7", "containerd-v2.4.2"}},
		{ctd: "latest", err: "not a release version"},
		{ctd: "2.4.2-rc.1", err: "not a release version"},
		{ctd: "1.6.20", err: "not supported"},
	} {
		t.Setenv(ContainerdVersionsEnv, tc.ctd)
		t.Setenv(CRIOVersionsEnv, tc.crio)
		got, err := Matrix()
		var names []string
		for _, s := range got {
			names = append(names, s.String())
		}
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q, %q: error %v, want %q", tc.ctd, tc.crio, err, tc.err)
		case tc.err == "" && (err != nil || strings.Join(names, " ") != strings.Join(tc.want, " ")):
			t.Errorf("%q, %q: %v, %v; want %v", tc.ctd, tc.crio, names, err, tc.want)
		}
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
