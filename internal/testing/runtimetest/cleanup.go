// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shimSocketDir is where containerd-shim-runc-v2 puts its sockets, named by
// a hash of containerd's address, namespace and shim id (pkg/shim
// SocketAddress); it is not configurable.
const shimSocketDir = "/run/containerd/s"

// cleanupDir removes every trace of the instance in dir once its runtime
// has stopped: processes whose command line refers to dir (leftover shims
// or conmons, a stray runtime) with all their descendants (the
// containers) and every process in the instance's cgroups; then the
// cgroups, the containerd shim sockets of the given shim ids, every mount
// below dir, and dir itself.
func cleanupDir(dir, socket string, shimIDs []string, logf func(string, ...any)) error {
	var errs []error
	procs := procsReferring(dir)
	for _, p := range procs {
		if p.shimID != "" {
			shimIDs = append(shimIDs, p.shimID)
		}
	}
	cgroups := cgroupDirs(cgroupName(dir))
	victims := withDescendants(procs)
	for _, pid := range cgroupPids(cgroups) {
		if !slices.Contains(victims, pid) {
			victims = append(victims, pid)
		}
	}
	if len(victims) > 0 {
		logf("runtimetest: killing %d leftover processes of %s: %v", len(victims), dir, victims)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL) // gone already is as good
		}
		if left := waitGone(victims, 10*time.Second); len(left) > 0 {
			errs = append(errs, fmt.Errorf("processes %v survived SIGKILL", left))
		}
	}
	if err := removeCgroups(cgroups); err != nil {
		errs = append(errs, err)
	}
	for _, id := range shimIDs {
		dir := filepath.Join(socket, CRINamespace, id)
		for _, p := range []string{dir, filepath.Join(dir, "debug")} {
			sum := sha256.Sum256([]byte(p))
			_ = os.Remove(filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum))) // gone already is as good
		}
	}
	if err := unmountBelow(dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

type procInfo struct {
	pid    int
	shimID string // the -id of a containerd-shim-runc-v2
}

// procsReferring lists the processes (other than this one) with an argument
// equal to dir or below it.
func procsReferring(dir string) []procInfo {
	ents, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		match := false
		for _, a := range args {
			if refersTo(a, dir) {
				match = true
				break
			}
		}
		if !match {
			continue
		}
		p := procInfo{pid: pid}
		if strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			for i := 0; i+1 < len(args); i++ {
				if args[i] == "-id" || args[i] == "--id" {
					p.shimID = args[i+1]
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// refersTo reports whether the argument a names dir or something below it,
// possibly after a flag= prefix or a unix:// scheme.
func refersTo(a, dir string) bool {
	for {
		i := strings.Index(a, dir)
		if i < 0 {
			return false
		}
		rest := a[i+len(dir):]
		if rest == "" || rest[0] == '/' {
			return true
		}
		a = a[i+1:]
	}
}

// withDescendants returns the pids of procs and of all their descendants.
func withDescendants(procs []procInfo) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	seen := map[int]bool{}
	var out []int
	var walk func(int)
	walk = func(pid int) {
		if seen[pid] || pid == os.Getpid() || pid <= 1 {
			return
		}
		seen[pid] = true
		out = append(out, pid)
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, p := range procs {
		walk(p.pid)
	}
	return out
}

// procStat returns the parent pid and state of pid from /proc/<pid>/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// waitGone waits until none of pids is alive and returns those still alive
// at the timeout.
func waitGone(pids []int, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountsBelow lists the mount points at or below dir, deepest first.
func mountsBelow(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 etc.) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountBelow unmounts every mount at or below dir, lazily if need be.
func unmountBelow(dir string) error {
	for round := 0; round < 10; round++ {
		mps, err := mountsBelow(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil {
				_ = syscall.Unmount(mp, syscall.MNT_DETACH) // best effort: the next run's cleanup tries again
			}
		}
	}
	mps, _ := mountsBelow(dir)
	if len(mps) > 0 {
		return fmt.Errorf("mounts remain below %s: %v", dir, mps)
	}
	return nil
}

// sweepStale cleans up instance directories left in os.TempDir() by test
// processes that died without calling Stop (a test binary killed by a
// timeout, say).
func sweepStale(logf func(string, ...any)) {
	tmp := os.TempDir()
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		if d, err := filepath.EvalSymlinks(dir); err == nil {
			dir = d
		}
		b, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			// Maybe being created right now; sweep only old ones.
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < time.Minute {
				continue
			}
		} else if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && alive(pid) {
			continue // the owner is alive
		}
		logf("runtimetest: cleaning up stale instance %s", dir)
		if err := cleanupDir(dir, filepath.Join(dir, "c.sock"), nil, logf); err != nil {
			logf("runtimetest: cleaning up %s: %v", dir, err)
		}
	}
}

// cgroupName is the cgroup parent of the pods of the instance in dir, below
// the root of every cgroup hierarchy; Stop removes it.
func cgroupName(dir string) string { return filepath.Base(dir) }

// cgroupDirs lists, deepest first, the directories of cgroup name in every
// mounted cgroup (v1 or v2) hierarchy.
func cgroupDirs(name string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		root := filepath.Join(unescapeMountinfo(f[4]), name)
		if seen[root] {
			continue
		}
		seen[root] = true
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out
}

// cgroupPids lists the processes in the given cgroup directories.
func cgroupPids(dirs []string) []int {
	var out []int
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil && pid > 1 && pid != os.Getpid() {
				out = append(out, pid)
			}
		}
	}
	return out
}

// removeCgroups removes the (emptied) cgroup directories, deepest first,
// retrying while the kernel still reports them busy.
func removeCgroups(dirs []string) error {
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for {
			err := syscall.Rmdir(d)
			if err == nil || err == syscall.ENOENT {
				break
			}
			if err != syscall.EBUSY || time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// UnmountBelow unmounts every mount at or below dir, deepest first: what
// a kubelet leaves in its root directory (its pods' volumes) once it and
// its pods are gone, or critest's mount propagation specs in its TMPDIR
// when a spec fails before its own cleanup.
func UnmountBelow(dir string) error { return unmountBelow(dir) }
