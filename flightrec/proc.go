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

// cmdline is /proc/PID/cmdline, its arguments separated by NUL bytes
// (argv splits them). Reading it takes the process's memory map lock,
// which a process stuck in the kernel may hold: callers read it under a
// deadline.
func (p Proc) cmdline(pid int) string {
	b, _ := readCapped(p.path(strconv.Itoa(pid), "cmdline"), 4096)
	return strings.TrimRight(string(b), "\x00")
}

// argv splits a command line as cmdline returns it.
func argv(cmdline string) []string {
	if cmdline == "" {
		return nil
	}
	return strings.Split(cmdline, "\x00")
}

// maxEnviron bounds the environment read to find one variable.
const maxEnviron = 256 << 10

// environVar is the value of one variable of a process's environment, at
// most 64 bytes of it; "" when it has none or it cannot be read. Nothing
// else of the environment is kept: it may hold secrets. Reading it takes
// the memory map lock, as cmdline does: callers read it under a deadline.
func (p Proc) environVar(pid int, name string) string {
	b, err := readCapped(p.path(strconv.Itoa(pid), "environ"), maxEnviron)
	if err != nil {
		return ""
	}
	prefix := []byte(name + "=")
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return termSafe(string(v[:min(len(v), 64)]))
		}
	}
	return ""
}

// termSafe keeps printable ASCII of s: what a process put in its own
// arguments or environment is data.
func termSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, s)
}

// maxThreads bounds the threads of one process read.
const maxThreads = 1024

// schedstat sums /proc/PID/task/*/schedstat: the time its threads ran on
// a CPU and the time they waited, runnable, for one (the run queue's
// delay), in nanoseconds since each thread started. A process's own
// schedstat is its main thread's alone, which in a Go program does little.
func (p Proc) schedstat(pid int) (ran, waited uint64, threads int, err error) {
	tasks, err := os.ReadDir(p.path(strconv.Itoa(pid), "task"))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, t := range tasks[:min(len(tasks), maxThreads)] {
		b, err := readCapped(p.path(strconv.Itoa(pid), "task", t.Name(), "schedstat"), 256)
		if err != nil {
			continue // gone meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		r, err1 := strconv.ParseUint(f[0], 10, 64)
		w, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		ran, waited, threads = ran+r, waited+w, threads+1
	}
	if threads == 0 {
		return 0, 0, 0, fmt.Errorf("no schedstat for pid %d", pid)
	}
	return ran, waited, threads, nil
}

// process reads one process: its stat, wait channel, kernel stack, RSS,
// and its threads in D with what they wait in.
func (p Proc) process(pid int, role string) (Process, error) {
	st, err := p.readStat(pid)
	if err != nil {
		return Process{}, err
	}
	pr := Process{Pid: pid, PPid: st.ppid, Comm: st.comm, Role: role, State: st.state, CPUSeconds: st.cpu}
	pr.WChan = p.wchan(strconv.Itoa(pid))
	if b, err := readCapped(p.path(strconv.Itoa(pid), "stack"), maxKernelStack); err == nil {
		pr.KernelStack = string(b)
	}
	pr.RSSBytes = p.rss(pid)
	if tasks, err := os.ReadDir(p.path(strconv.Itoa(pid), "task")); err == nil {
		for _, t := range tasks[:min(len(tasks), maxThreads)] {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || tid == pid {
				continue
			}
			b, err := readCapped(p.path(strconv.Itoa(pid), "task", t.Name(), "stat"), 4096)
			if err != nil {
				continue
			}
			if ts, err := parseStat(string(b)); err == nil && ts.state == "D" {
				pr.ThreadsD++
				if w := p.wchan(strconv.Itoa(pid), "task", t.Name()); w != "" && len(pr.ThreadWaits) < 16 {
					if pr.ThreadWaits == nil {
						pr.ThreadWaits = map[string]int{}
					}
					pr.ThreadWaits[w]++
				}
			}
		}
	}
	if pr.State == "D" {
		pr.ThreadsD++
	}
	return pr, nil
}

// wchan is the wait channel of a process or thread (the path under
// /proc), "" when it runs or cannot be read.
func (p Proc) wchan(elem ...string) string {
	b, err := readCapped(p.path(append(elem, "wchan")...), 256)
	if err != nil {
		return ""
	}
	if w := strings.TrimSpace(string(b)); w != "0" {
		return termSafe(w)
	}
	return ""
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
