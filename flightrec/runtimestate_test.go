// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A debug socket that answers: the stacks, cut at the cap.
func TestContainerdStacksCutAtTheCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "debug.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/goroutine" || r.URL.Query().Get("debug") != "2" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(strings.Repeat("goroutine 1 [running]:\nmain.main()\n\n", 1000)))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	stacks, truncated, err := containerdStacks(t.Context(), path, 100)
	if err != nil || !truncated || len(stacks) != 100 || !strings.HasPrefix(stacks, "goroutine 1 [running]") {
		t.Errorf("stacks %q, truncated %t, %v; want the first 100 bytes", stacks, truncated, err)
	}
	stacks, truncated, err = containerdStacks(t.Context(), path, 1<<20)
	if err != nil || truncated || strings.Count(stacks, "goroutine ") != 1000 {
		t.Errorf("truncated %t, %v, %d goroutines; want all 1000", truncated, err, strings.Count(stacks, "goroutine "))
	}
}

// CRI-O's dump: SIGUSR1 to the runtime, which writes its stacks to its
// /tmp; here a shell that does so when signalled, its /tmp a directory
// of the test's seen through a fake /proc.
func TestCRIOStacksFromTheDumpItWrites(t *testing.T) {
	dump := t.TempDir()
	// The file is created, then written after a while, as CRI-O does.
	sh := exec.Command("sh", "-c", `trap 'f=$DUMP/crio-goroutine-stacks-2026-11-26T120000Z.log; : > $f; sleep 0.2; `+
		`echo "goroutine 1 [running]:" > $f' USR1; echo ready; while :; do sleep 0.05; done`)
	sh.Env = append(os.Environ(), "DUMP="+dump)
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Process.Kill(); _ = sh.Wait() })
	if _, err := out.Read(make([]byte, 6)); err != nil { // the trap is set
		t.Fatal(err)
	}
	p := newFakeProc(t)
	root := filepath.Join(p.root, strconv.Itoa(sh.Process.Pid), "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dump, filepath.Join(root, "tmp")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stacks, truncated, err := crioStacks(ctx, Proc{Root: p.root}, sh.Process.Pid, 1<<20)
	if err != nil || truncated || stacks != "goroutine 1 [running]:\n" {
		t.Errorf("stacks %q, truncated %t, %v; want the dump as written, not the empty file first created", stacks,
			truncated, err)
	}
	if _, _, err := crioStacks(ctx, Proc{Root: p.root}, 0, 1<<20); err == nil {
		t.Error("no error without CRI-O's process")
	}
}
