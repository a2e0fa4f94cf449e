// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// userHZ is the kernel's USER_HZ, the unit of /proc/PID/stat's times: 100
// on every architecture Linux runs containers on.
const userHZ = 100

// maxProcesses bounds the processes a recording lists.
const maxProcesses = 256

// maxKernelStack bounds one process's kernel stack.
const maxKernelStack = 4 << 10

// Proc reads a /proc tree: the host's at "/proc", or a test's.
type Proc struct {
	// Root is the /proc directory.
	Root string
}

func (p Proc) path(elem ...string) string { return filepath.Join(append([]string{p.Root}, elem...)...) }

// readCapped reads at most max bytes of a file; /proc files have no size
// to trust.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	return io.ReadAll(io.LimitReader(f, limit))
}

// stat is what /proc/PID/stat tells.
type stat struct {
	comm      string
	state     string
	ppid      int
	cpu       float64 // user+system seconds
	startTick uint64  // start, in ticks since boot
}

// readStat reads /proc/PID/stat. The comm is between the first "(" and
// the last ")": it may hold spaces and parentheses itself.
func (p Proc) readStat(pid int) (stat, error) {
	b, err := readCapped(p.path(strconv.Itoa(pid), "stat"), 4096)
	if err != nil {
		return stat{}, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (stat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return stat{}, fmt.Errorf("malformed stat %q", s)
	}
	st := stat{comm: s[open+1 : end]}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state); utime, stime are 14 and 15; starttime 22.
	if len(f) < 20 {
		return stat{}, fmt.Errorf("stat of %s: %d fields", st.comm, len(f)+2)
	}
	st.state = f[0]
	st.ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	stt, _ := strconv.ParseUint(f[12], 10, 64)
	st.cpu = float64(ut+stt) / userHZ
	st.startTick, _ = strconv.ParseUint(f[19], 10, 64)
	return st, nil
}

// pids lists the processes.
func (p Proc) pids() ([]int, error) {
	ents, err := os.ReadDir(p.Root)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// bootTime is when the machine booted, from /proc/stat's btime.
func (p Proc) bootTime() (time.Time, error) {
	b, err := readCapped(p.path("stat"), 1<<20)
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(n, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in stat")
}

// rss is /proc/PID/status's VmRSS in bytes.
func (p Proc) rss(pid int) int64 {
	b, err := readCapped(p.path(strconv.Itoa(pid), "status"), 16<<10)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// cmdline is /proc/PID/cmdline, its arguments joined by spaces. Reading it
// takes the process's memory map lock, which a process stuck in the
// kernel may hold: callers read it under a deadline.
func (p Proc) cmdline(pid int) string {
	b, _ := readCapped(p.path(strconv.Itoa(pid), "cmdline"), 4096)
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

// process reads one process: its stat, wait channel, kernel stack, RSS and
// the number of its threads in D state.
func (p Proc) process(pid int, role string) (Process, error) {
	st, err := p.readStat(pid)
	if err != nil {
		return Process{}, err
	}
	pr := Process{Pid: pid, PPid: st.ppid, Comm: st.comm, Role: role, State: st.state, CPUSeconds: st.cpu}
	if b, err := readCapped(p.path(strconv.Itoa(pid), "wchan"), 256); err == nil {
		if w := strings.TrimSpace(string(b)); w != "0" {
			pr.WChan = w
		}
	}
	if b, err := readCapped(p.path(strconv.Itoa(pid), "stack"), maxKernelStack); err == nil {
		pr.KernelStack = string(b)
	}
	pr.RSSBytes = p.rss(pid)
	if tasks, err := os.ReadDir(p.path(strconv.Itoa(pid), "task")); err == nil {
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || tid == pid {
				continue
			}
			if b, err := readCapped(p.path(strconv.Itoa(pid), "task", t.Name(), "stat"), 4096); err == nil {
				if ts, err := parseStat(string(b)); err == nil && ts.state == "D" {
					pr.ThreadsD++
				}
			}
		}
	}
	if pr.State == "D" {
		pr.ThreadsD++
	}
	return pr, nil
}

// socketInode is the inode of the listening unix socket at path, from
// /proc/net/unix, or 0.
func (p Proc) socketInode(path string) uint64 {
	b, err := readCapped(p.path("net", "unix"), 16<<20)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(sc.Text())
		if len(f) >= 8 && f[7] == path {
			n, _ := strconv.ParseUint(f[6], 10, 64)
			return n
		}
	}
	return 0
}

// socketOwner is the process holding the socket of inode open, or 0.
func (p Proc) socketOwner(pids []int, inode uint64) int {
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, pid := range pids {
		fds, err := os.ReadDir(p.path(strconv.Itoa(pid), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(p.path(strconv.Itoa(pid), "fd", fd.Name())); err == nil && l == want {
				return pid
			}
		}
	}
	return 0
}

// runtimeNames are the comms of the runtimes' processes, and shimNames
// those of their shims.
var (
	runtimeNames = []string{"containerd", "crio"}
	shimNames    = []string{"containerd-shim-runc-v2", "containerd-shim", "conmon"}
)

// isShim tells a shim's comm; the kernel cuts comm at 15 bytes
// ("containerd-shim" for containerd-shim-runc-v2).
func isShim(comm string) bool {
	for _, n := range shimNames {
		if comm == n || (len(comm) == 15 && strings.HasPrefix(n, comm)) {
			return true
		}
	}
	return false
}

// treeOptions say what Tree looks for.
type treeOptions struct {
	// socket is the runtime's socket path: its owner is the runtime, and
	// shims whose command line names it are its shims.
	socket string
	// runtimePid is the runtime's process as found before: kept while it
	// still runs a runtime, sparing the search of every process's
	// descriptors.
	runtimePid int
	// foundBy is how runtimePid was found.
	foundBy string
	// perProcess bounds the reading of each process.
	perProcess time.Duration
	// children adds the shims' descendants.
	children bool
	// cmdlines, if set, keeps the shims' command lines across looks.
	cmdlines *cmdlineCache
}

// Tree finds the runtime's process (the owner of the socket, else by
// name), its shims (those whose command line names the socket, or every
// shim when none does, as conmon's do not) and, if asked, their
// descendants, and reads each under perProcess. It lists at most
// maxProcesses.
func (p Proc) tree(o treeOptions) (*Processes, error) {
	pids, err := p.pids()
	if err != nil {
		return nil, err
	}
	stats := make(map[int]stat, len(pids))
	for _, pid := range pids {
		if st, err := p.readStat(pid); err == nil {
			stats[pid] = st
		}
	}
	out := &Processes{}
	runtimePid := p.findRuntime(o, pids, stats, out)
	roles := map[int]string{}
	var order []int
	add := func(pid int, role string) {
		if _, ok := roles[pid]; !ok && len(order) < maxProcesses {
			roles[pid] = role
			order = append(order, pid)
		}
	}
	if runtimePid != 0 {
		add(runtimePid, "runtime")
	}
	for _, pid := range p.findShims(o, pids, stats) {
		add(pid, "shim")
	}
	if o.children {
		children := map[int][]int{}
		for _, pid := range pids {
			children[stats[pid].ppid] = append(children[stats[pid].ppid], pid)
		}
		for i := 0; i < len(order); i++ {
			if roles[order[i]] == "runtime" {
				continue // its children are its shims, found above, or helpers
			}
			for _, c := range children[order[i]] {
				add(c, "child")
			}
		}
	}
	for _, pid := range order {
		pr, ok := p.processWithin(pid, roles[pid], o.perProcess)
		if ok {
			if pr.TimedOut {
				pr.Comm, pr.State, pr.PPid = stats[pid].comm, stats[pid].state, stats[pid].ppid
			}
			out.List = append(out.List, pr)
		}
	}
	return out, nil
}

// findRuntime finds the runtime's process: the one found before if it
// still runs a runtime, else the owner of the socket, else the first by
// name; 0 if none. It tells out how.
func (p Proc) findRuntime(o treeOptions, pids []int, stats map[int]stat, out *Processes) int {
	if st, ok := stats[o.runtimePid]; ok && slices.Contains(runtimeNames, st.comm) {
		out.FoundBy = o.foundBy
		return o.runtimePid
	}
	if o.socket != "" {
		if ino := p.socketInode(o.socket); ino != 0 {
			if pid := p.socketOwner(pids, ino); pid != 0 {
				out.FoundBy = "socket"
				return pid
			}
		}
	}
	for _, pid := range pids {
		if slices.Contains(runtimeNames, stats[pid].comm) {
			out.FoundBy = "name"
			return pid
		}
	}
	return 0
}

// findShims finds the runtime's shims: those whose command line names
// the socket, or every shim when none does (conmon's do not).
func (p Proc) findShims(o treeOptions, pids []int, stats map[int]stat) []int {
	var shims, named []int
	for _, pid := range pids {
		if isShim(stats[pid].comm) {
			shims = append(shims, pid)
			if o.socket != "" && strings.Contains(o.cmdlines.get(p, pid, stats[pid].startTick, o.perProcess), o.socket) {
				named = append(named, pid)
			}
		}
	}
	if len(named) > 0 {
		return named
	}
	return shims
}

// cmdlineCache keeps the command lines of processes, which do not
// change, by pid and start time. Reading one takes the process's memory
// map lock, which a process stuck in the kernel may hold: a read that
// does not answer within its deadline is abandoned, and not tried again
// while it has not returned, so that looks every few seconds do not pile
// blocked goroutines onto one process.
type cmdlineCache struct {
	mu          sync.Mutex
	known       map[cmdlineKey]string
	outstanding map[cmdlineKey]bool
}

type cmdlineKey struct {
	pid   int
	start uint64
}

func newCmdlineCache() *cmdlineCache {
	return &cmdlineCache{known: map[cmdlineKey]string{}, outstanding: map[cmdlineKey]bool{}}
}

// get returns the command line of pid, started at start, reading it
// within d if it is not known; "" if it cannot be had now. A nil cache
// reads every time.
func (c *cmdlineCache) get(p Proc, pid int, start uint64, d time.Duration) string {
	if c == nil {
		s, _, _ := within(d, func() (string, error) { return p.cmdline(pid), nil })
		return s
	}
	k := cmdlineKey{pid, start}
	c.mu.Lock()
	if s, ok := c.known[k]; ok {
		c.mu.Unlock()
		return s
	}
	if c.outstanding[k] {
		c.mu.Unlock()
		return ""
	}
	c.outstanding[k] = true
	if len(c.known) > 4*maxProcesses {
		clear(c.known) // processes gone; those still there are read again
	}
	c.mu.Unlock()
	s, _, timedOut := within(d, func() (string, error) {
		s := p.cmdline(pid)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.outstanding, k)
		c.known[k] = s
		return s, nil
	})
	if timedOut {
		return ""
	}
	return s
}

// processWithin reads one process within d; one that timed out is listed
// with what its stat said, marked TimedOut. ok is false when it is gone.
func (p Proc) processWithin(pid int, role string, d time.Duration) (Process, bool) {
	pr, err, timedOut := within(d, func() (Process, error) { return p.process(pid, role) })
	if timedOut {
		return Process{Pid: pid, Role: role, TimedOut: true}, true
	}
	return pr, err == nil
}

// within runs f in a goroutine of its own and waits at most d for it: a
// read that blocks in the kernel is abandoned, never waited for.
func within[T any](d time.Duration, f func() (T, error)) (T, error, bool) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err, false
	case <-t.C:
		var zero T
		return zero, nil, true
	}
}
