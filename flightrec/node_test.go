// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/plegkit/pleg/kubeletpleg"
)

// kubeletSource is a kubelet whose PLEG was last seen age ago.
type kubeletSource struct{ age float64 }

func (k kubeletSource) Read(context.Context) kubeletpleg.Reading {
	return kubeletpleg.Reading{Source: "fake", LastSeenAgeSeconds: k.age}
}

func TestSnapshot(t *testing.T) {
	p, cg := node(t)
	n := NewNodeProbe(NodeConfig{Endpoint: "unix:///run/containerd/containerd.sock", Proc: p.root, Cgroup: cg.root,
		Statfs: func(string) error { return nil }, Kubelet: kubeletSource{95}, PartTimeout: time.Second,
		Window: 10 * time.Millisecond, Now: func() time.Time { return at }})
	rec := n.Snapshot(t.Context())
	if rec.Trigger != TriggerLive || rec.Name != "live" {
		t.Errorf("trigger %q, name %q", rec.Trigger, rec.Name)
	}
	parts := map[string]Part{}
	for _, p := range rec.Parts {
		parts[p.Name] = p
	}
	for _, name := range []string{PartProcesses, PartHost, PartMounts, PartKubelet} {
		if p, ok := parts[name]; !ok || p.TimedOut || p.Error != "" || p.Skipped != "" {
			t.Errorf("part %s: %+v", name, p)
		}
	}
	if parts[PartKernelLog].Skipped == "" {
		t.Error("the kernel log read without asking")
	}
	if rec.Runtime == nil || rec.Runtime.Pid != 100 || rec.Runtime.UptimeSeconds != 900 {
		t.Errorf("runtime %+v", rec.Runtime)
	}
	if rec.Host == nil || rec.Host.PIDs == nil || rec.Host.PIDs.InUse != 32700 || rec.Host.OOMKills != 7 ||
		rec.Host.MountsChecked != 2 {
		t.Errorf("host %+v", rec.Host)
	}
	if rec.Kubelet == nil || rec.Kubelet.LastSeenAgeSeconds != 95 {
		t.Errorf("kubelet %+v", rec.Kubelet)
	}
	if rec.Processes == nil || len(rec.Processes.List) < 5 {
		t.Errorf("processes %+v", rec.Processes)
	}
}

// A read of /proc that blocks in the kernel (a process's memory map lock
// held by a process stuck in D; here a FIFO no one writes) is abandoned
// at its deadline: the snapshot comes back in time, with the rest.
func TestSnapshotNeverHangsOnAProcRead(t *testing.T) {
	p, cg := node(t)
	fifo := filepath.Join(p.root, "300", "environ")
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		// Release the abandoned read.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
	})
	n := NewNodeProbe(NodeConfig{Endpoint: "unix:///run/containerd/containerd.sock", Proc: p.root, Cgroup: cg.root,
		Statfs: func(string) error { return nil }, PartTimeout: 400 * time.Millisecond})
	start := time.Now()
	rec := n.Snapshot(t.Context())
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the snapshot took %v", took)
	}
	found := false
	for _, pr := range rec.Processes.List {
		if pr.Pid == 300 {
			found = true
		}
	}
	if rec.Processes == nil || len(rec.Processes.List) < 5 || !found {
		t.Errorf("processes %+v: want them all, the plugin whose environment did not answer kept", rec.Processes)
	}
}
