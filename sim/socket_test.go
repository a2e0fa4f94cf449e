// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A second simulator on the socket of a running one is refused and leaves
// it serving; the first one's Stop removes the socket it created.
func TestSecondSimOnALiveSocketIsRefused(t *testing.T) {
	first := startSim(t, Options{Pods: 1, Containers: 1})
	second, err := New(Options{Socket: first.opts.Socket, Pods: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Stop() }()
	if err := second.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Fatalf("a second Start on the same socket = %v, want refused", err)
	}
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	resp, err := dial(t, first).ListPodSandbox(testContext(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(resp.Items) != 1 {
		t.Fatalf("the first simulator after the second gave up: %v, %v", resp, err)
	}
	fi, err := os.Stat(first.opts.Socket)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket %v, %v: want mode 0660", fi, err)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(first.opts.Socket); !os.IsNotExist(err) {
		t.Errorf("socket left after Stop: %v", err)
	}
}
