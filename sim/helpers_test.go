// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// socketPath returns a short socket path: t.TempDir() can pass the 108
// bytes a unix socket path may have.
func socketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startSim starts a simulator for the test and stops it at the end.
func startSim(t testing.TB, opts Options) *Sim {
	t.Helper()
	if opts.Socket == "" {
		opts.Socket = socketPath(t)
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// dial returns a raw CRI client of the simulator.
func dial(t testing.TB, s *Sim, opts ...grpc.DialOption) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.Endpoint(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// testContext ends when the test must give up: its calls are functional
// waits, never measurements, and a busy machine only makes them longer.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), giveUp(t))
	t.Cleanup(cancel)
	return ctx
}

// giveUp is when a test stops waiting for what it waits for: a minute
// before go test's -timeout would end the binary, so that a wait that
// never ends fails with its own message. Without a -timeout, in an hour.
func giveUp(t testing.TB) time.Time {
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			return d.Add(-time.Minute)
		}
	}
	return time.Now().Add(time.Hour)
}

// eventually polls cond until it holds, failing the test when it must
// give up.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := giveUp(t)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// podSandboxConfig is a kubelet-like sandbox config for a test pod.
func podSandboxConfig(name, uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Uid: uid, Namespace: "test"},
		Labels: map[string]string{
			"io.kubernetes.pod.name":      name,
			"io.kubernetes.pod.namespace": "test",
			"io.kubernetes.pod.uid":       uid,
		},
	}
}

// containerConfigFor is a kubelet-like container config.
func containerConfigFor(podName, uid, name string, attempt uint32) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels: map[string]string{
			"io.kubernetes.pod.name":       podName,
			"io.kubernetes.pod.namespace":  "test",
			"io.kubernetes.pod.uid":        uid,
			"io.kubernetes.container.name": name,
		},
		Annotations: map[string]string{"io.kubernetes.container.restartCount": "0"},
	}
}
