// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxMounts bounds the mounts a recording stats.
const maxMounts = 512

// maxKernelLogLines bounds the kernel log's lines a recording keeps.
const maxKernelLogLines = 200

// hostState reads pressure, load and memory from the /proc tree. Each is
// optional: a kernel without PSI has no /proc/pressure.
func (p Proc) hostState() *Host {
	h := &Host{Pressure: map[string]Pressure{}}
	for _, res := range []string{"cpu", "memory", "io"} {
		b, err := readCapped(p.path("pressure", res), 4096)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				h.PressureAbsent = true
			}
			continue
		}
		h.Pressure[res] = parsePressure(string(b))
	}
	if len(h.Pressure) == 0 {
		h.Pressure = nil
	}
	if b, err := readCapped(p.path("loadavg"), 256); err == nil {
		f := strings.Fields(string(b))
		for i := 0; i < 3 && i < len(f); i++ {
			h.Load[i], _ = strconv.ParseFloat(f[i], 64)
		}
	}
	if b, err := readCapped(p.path("meminfo"), 64<<10); err == nil {
		h.Memory = parseMeminfo(string(b))
	}
	return h
}

// parsePressure reads a PSI file:
//
//	some avg10=1.00 avg60=2.00 avg300=3.00 total=123
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
func parsePressure(s string) Pressure {
	var p Pressure
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		vals := map[string]float64{}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				vals[k], _ = strconv.ParseFloat(v, 64)
			}
		}
		switch f[0] {
		case "some":
			p.SomeAvg10, p.SomeAvg60, p.SomeAvg300 = vals["avg10"], vals["avg60"], vals["avg300"]
		case "full":
			p.FullAvg10, p.FullAvg60 = vals["avg10"], vals["avg60"]
		}
	}
	return p
}

// meminfoKeys are the lines of /proc/meminfo a recording keeps.
var meminfoKeys = []string{"MemTotal", "MemAvailable", "SwapTotal", "SwapFree", "Dirty", "Writeback"}

func parseMeminfo(s string) map[string]int64 {
	out := map[string]int64{}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, want := range meminfoKeys {
			if k == want {
				f := strings.Fields(v)
				if len(f) > 0 {
					n, _ := strconv.ParseInt(f[0], 10, 64)
					if len(f) > 1 && f[1] == "kB" {
						n <<= 10
					}
					out[k] = n
				}
			}
		}
	}
	return out
}

// mountPoints reads the mount points of pid 1's mount namespace (the
// host's, on a host or with hostPID; the pod's own otherwise, where pid 1
// is pleg) and the prefix under which to stat them: /proc/1/root, or ""
// where pleg shares pid 1's mount namespace. Where pid 1's mounts or its
// root cannot be read, pleg's own mounts, under "": a statfs through a
// root the kernel denies fails at once, and a hung mount would pass for
// one that answers. At most maxMounts.
func (p Proc) mountPoints() (mounts []string, prefix string, err error) {
	b, err := readCapped(p.path("1", "mountinfo"), 4<<20)
	prefix = p.path("1", "root")
	switch {
	case err != nil || !p.canEnterRoot("1"):
		b, err = readCapped(p.path("self", "mountinfo"), 4<<20)
		prefix = ""
	case p.sharesMountNamespace("1"):
		prefix = ""
	}
	if err != nil {
		return nil, "", err
	}
	// A point mounted over more than once (/dev/pts, /dev/shm in a
	// container's namespace) is stat'ed once: a stat reaches the top one.
	seen := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeOctal(f[4])
		if seen[mp] {
			continue
		}
		seen[mp] = true
		mounts = append(mounts, mp)
		if len(mounts) == maxMounts {
			break
		}
	}
	return mounts, prefix, nil
}

// canEnterRoot tells whether the root of process pid can be entered:
// not where the kernel denies it (another user namespace's pid 1).
func (p Proc) canEnterRoot(pid string) bool {
	_, err := os.Stat(p.path(pid, "root") + "/")
	return err == nil
}

// sharesMountNamespace tells whether the process pid is in this
// process's mount namespace.
func (p Proc) sharesMountNamespace(pid string) bool {
	theirs, err := os.Readlink(p.path(pid, "ns", "mnt"))
	if err != nil {
		return false
	}
	ours, err := os.Readlink(p.path("self", "ns", "mnt"))
	return err == nil && theirs == ours
}

// unescapeOctal undoes mountinfo's \040-style escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
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

// Statfs is a statfs(2) of a path; tests inject a fake.
type Statfs func(path string) error

// RealStatfs is the system's statfs.
func RealStatfs(path string) error {
	var st syscall.Statfs_t
	return syscall.Statfs(path, &st)
}

// mountProber stats mounts, each from a goroutine of its own. A statfs on
// a hung mount (NFS whose server is gone) blocks its thread in the kernel
// for as long as the mount hangs: the prober never waits for it past the
// deadline, and while it has not returned it is not tried again, so that
// repeated recordings do not pile blocked threads onto one mount.
type mountProber struct {
	statfs Statfs

	mu          sync.Mutex
	outstanding map[string]bool
}

func newMountProber(statfs Statfs) *mountProber {
	return &mountProber{statfs: statfs, outstanding: map[string]bool{}}
}

// probe stats each mount, under prefix, and returns those that did not
// answer by deadline, and those still blocked from an earlier probe.
func (m *mountProber) probe(mounts []string, prefix string, deadline time.Duration) []string {
	done := make(chan string, len(mounts))
	started := 0
	var hung []string
	m.mu.Lock()
	for _, mp := range mounts {
		if m.outstanding[mp] {
			hung = append(hung, mp)
			continue
		}
		m.outstanding[mp] = true
		started++
		go func() {
			_ = m.statfs(prefix + mp)
			m.mu.Lock()
			delete(m.outstanding, mp)
			m.mu.Unlock()
			done <- mp
		}()
	}
	m.mu.Unlock()
	answered := map[string]bool{}
	t := time.NewTimer(deadline)
	defer t.Stop()
wait:
	for range started {
		select {
		case mp := <-done:
			answered[mp] = true
		case <-t.C:
			break wait
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mp := range mounts {
		if !answered[mp] && m.outstanding[mp] && !slices.Contains(hung, mp) {
			hung = append(hung, mp)
		}
	}
	return hung
}

// kernelLogPattern picks the kernel log's lines that tell of what hangs
// a runtime: hung tasks, OOM kills, I/O and file system errors, an NFS
// server gone.
var kernelLogPattern = regexp.MustCompile(`(?i)blocked for more than|hung_task|out of memory|oom-kill|` +
	`killed process|i/o error|blk_update_request|buffer i/o|ext4-fs error|xfs.*(error|shutdown)|` +
	`not responding|task abort|soft lockup|rcu.*stall`)

// parseKmsg picks from /dev/kmsg records (pri,seq,usec,flags;message) the
// lines since sinceUsec after boot that kernelLogPattern matches.
func parseKmsg(records []string, sinceUsec uint64) []string {
	var out []string
	for _, r := range records {
		head, msg, ok := strings.Cut(r, ";")
		if !ok {
			continue
		}
		f := strings.Split(head, ",")
		if len(f) < 3 {
			continue
		}
		usec, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil || usec < sinceUsec {
			continue
		}
		msg, _, _ = strings.Cut(msg, "\n") // continuation lines follow
		if kernelLogPattern.MatchString(msg) {
			out = append(out, "["+strconv.FormatFloat(float64(usec)/1e6, 'f', 6, 64)+"] "+msg)
			if len(out) > maxKernelLogLines {
				out = out[1:]
			}
		}
	}
	return out
}

// readKmsg reads the kernel log's records from path without blocking:
// /dev/kmsg opened non-blocking returns EAGAIN at its end.
func readKmsg(path string, limit int) ([]string, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = syscall.Close(fd) }() // read only: nothing to lose
	var out []string
	buf := make([]byte, 8192)
	for len(out) < limit {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EAGAIN {
			break
		}
		if err == syscall.EPIPE {
			continue // records overwritten while read: go on from the next
		}
		if err != nil {
			return out, err
		}
		if n <= 0 {
			break
		}
		out = append(out, string(buf[:n]))
	}
	return out, nil
}

// syslog(2) actions.
const (
	syslogActionReadAll    = 3
	syslogActionSizeBuffer = 10
)

// readSyslog reads the kernel's ring buffer with syslog(2), which needs
// no device: a pod has no /dev/kmsg, and its device cgroup refuses one
// mounted from the host. Where kernel.dmesg_restrict is 1 it needs
// CAP_SYSLOG. Reading all of it never blocks.
func readSyslog(limit int) ([]string, error) {
	size, err := syscall.Klogctl(syslogActionSizeBuffer, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, min(size, limit))
	n, err := syscall.Klogctl(syslogActionReadAll, buf)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(buf[:n]), "\n"), nil
}

// parseSyslog picks from syslog(2)'s lines (<pri>[seconds.micros] message)
// those since sinceUsec after boot that kernelLogPattern matches.
func parseSyslog(lines []string, sinceUsec uint64) []string {
	var out []string
	for _, l := range lines {
		_, rest, ok := strings.Cut(l, "[")
		if !ok {
			continue
		}
		ts, msg, ok := strings.Cut(rest, "]")
		if !ok {
			continue
		}
		secs, err := strconv.ParseFloat(strings.TrimSpace(ts), 64)
		if err != nil || uint64(secs*1e6) < sinceUsec {
			continue
		}
		msg = strings.TrimSpace(msg)
		if kernelLogPattern.MatchString(msg) {
			out = append(out, "["+strconv.FormatFloat(secs, 'f', 6, 64)+"] "+msg)
			if len(out) > maxKernelLogLines {
				out = out[1:]
			}
		}
	}
	return out
}

// kernelLog reads the kernel log's lines since sinceUsec that tell of
// hangs: from /dev/kmsg at kmsgPath, else with syslog(2).
func kernelLog(kmsgPath string, sinceUsec uint64, maxBytes int64) ([]string, error) {
	records, err := readKmsg(kmsgPath, 100000)
	if err == nil {
		return parseKmsg(records, sinceUsec), nil
	}
	lines, serr := readSyslog(int(min(maxBytes, 1<<26)))
	if serr != nil {
		return nil, errors.Join(err, fmt.Errorf("syslog(2): %w", serr))
	}
	return parseSyslog(lines, sinceUsec), nil
}
