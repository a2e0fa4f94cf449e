// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// containerdStacks fetches containerd's goroutine stacks from its debug
// socket ([debug] address in its configuration), which serves Go's
// profiles over HTTP; at most limit bytes, truncated telling it was cut.
func containerdStacks(ctx context.Context, socket string, limit int64) (stacks string, truncated bool, err error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://containerd/debug/pprof/goroutine?debug=2", nil)
	if err != nil {
		return "", false, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", false, fmt.Errorf("%s: %s", socket, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if int64(len(b)) > limit {
		return string(b[:limit]), true, err
	}
	return string(b), false, err
}

// crioStackDumpDir is where CRI-O writes its goroutine stacks on SIGUSR1
// (crio-goroutine-stacks-<time>.log), in its own mount namespace: read
// through /proc/PID/root.
const crioStackDumpDir = "/tmp"

// crioStacks asks CRI-O (pid) for its goroutine stacks with SIGUSR1 and
// reads the dump it writes, waiting for a new one until ctx ends. The
// signal interrupts nothing in CRI-O but it is a signal to the runtime,
// so it is opt-in.
func crioStacks(ctx context.Context, proc Proc, pid int, limit int64) (string, bool, error) {
	if pid == 0 {
		return "", false, errors.New("CRI-O's process was not found")
	}
	dir := proc.path(strconv.Itoa(pid), "root", crioStackDumpDir)
	before := crioDumps(dir)
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return "", false, err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	// CRI-O creates the file, then writes it: it is read once its size
	// has held, above zero, over one tick.
	var (
		dump string
		size int64 = -1
	)
	for {
		if dump == "" {
			for _, d := range crioDumps(dir) {
				if !slices.Contains(before, d) {
					dump = d
				}
			}
		}
		if dump != "" {
			fi, err := os.Stat(filepath.Join(dir, dump))
			if err == nil && fi.Size() > 0 && fi.Size() == size {
				b, err := readCapped(filepath.Join(dir, dump), limit+1)
				if int64(len(b)) > limit {
					return string(b[:limit]), true, err
				}
				return string(b), false, err
			}
			if err == nil {
				size = fi.Size()
			}
		}
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-tick.C:
		}
	}
}

func crioDumps(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "crio-goroutine-stacks-") {
			out = append(out, e.Name())
		}
	}
	return out
}
