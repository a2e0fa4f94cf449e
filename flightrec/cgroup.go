// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cgroupFS reads the cgroup file systems mounted under root
// (/sys/fs/cgroup): v1's one hierarchy per controller, v2's unified one,
// or both (v2 at root/unified).
type cgroupFS struct{ root string }

// maxPodCgroups bounds the pods' cgroups read for their PIDs.
const maxPodCgroups = 2048

// membership is where a process is in each hierarchy, from
// /proc/PID/cgroup: v1's lines name their controllers
// ("4:cpu,cpuacct:/path"), v2's line is "0::/path".
type membership struct {
	v1 map[string]string // controller -> path; the key "cpu,cpuacct" too
	v2 string
	ok bool
}

func (p Proc) membership(pid int) membership {
	b, err := readCapped(p.path(strconv.Itoa(pid), "cgroup"), 16<<10)
	if err != nil {
		return membership{}
	}
	m := membership{v1: map[string]string{}, ok: true}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			m.v2 = f[2]
			continue
		}
		m.v1[f[1]] = f[2]
		for c := range strings.SplitSeq(f[1], ",") {
			m.v1[c] = f[2]
		}
	}
	return m
}

// dir is the directory of the process's cgroup of controller: v1's
// hierarchy of it (mounted as the controllers joined, "cpu,cpuacct", or
// under each name), else v2's when it has the controller. "" if none.
func (c cgroupFS) dir(m membership, controller string) string {
	if path, ok := m.v1[controller]; ok {
		for k, v := range m.v1 {
			if v == path && strings.Contains(k, ",") && slices.Contains(strings.Split(k, ","), controller) {
				if d := filepath.Join(c.root, k, path); isDir(d) {
					return d
				}
			}
		}
		if d := filepath.Join(c.root, controller, path); isDir(d) {
			return d
		}
	}
	if m.v2 == "" {
		return ""
	}
	for _, base := range []string{c.root, filepath.Join(c.root, "unified")} {
		ctrls, err := readCapped(filepath.Join(base, "cgroup.controllers"), 4096)
		if err != nil || !slices.Contains(strings.Fields(string(ctrls)), controller) {
			continue
		}
		if d := filepath.Join(base, m.v2); isDir(d) {
			return d
		}
	}
	return ""
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// readInt reads a cgroup file holding one number, or "max" (0: no limit).
func readInt(path string) (int64, bool) {
	b, err := readCapped(path, 64)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// keyValues reads a flat keyed cgroup file (cpu.stat).
func keyValues(path string) map[string]uint64 {
	b, err := readCapped(path, 4096)
	if err != nil {
		return nil
	}
	out := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				out[f[0]] = n
			}
		}
	}
	return out
}

// cgroups reads the cgroups a process runs in, as they limit it: the
// cpu controller's quota and throttling and, when all, its PIDs and the
// I/O limits set on it. nil when none is readable (not a host's view).
func (p Proc) cgroups(pid int, c cgroupFS, all bool) *Cgroup {
	if c.root == "" {
		return nil
	}
	m := p.membership(pid)
	if !m.ok {
		return nil
	}
	out := &Cgroup{}
	if d := c.dir(m, "cpu"); d != "" {
		out.CPUPath = c.rel(d)
		readCPU(out, d)
	}
	if all {
		if d := c.dir(m, "pids"); d != "" {
			out.PidsPath = c.rel(d)
			out.PidsCurrent, _ = readInt(filepath.Join(d, "pids.current"))
			out.PidsMax, _ = readInt(filepath.Join(d, "pids.max"))
		}
		readIO(out, c, m)
	}
	if out.CPUPath == "" && out.PidsPath == "" && out.IOPath == "" {
		return nil
	}
	return out
}

// rel is a cgroup directory relative to the file systems' root, as the
// evidence names it.
func (c cgroupFS) rel(d string) string {
	if r, err := filepath.Rel(c.root, d); err == nil {
		return "/" + r
	}
	return d
}

// readCPU reads the cpu controller's quota and throttling: v1's
// cpu.cfs_quota_us (-1: none), cpu.cfs_period_us and cpu.stat's
// throttled_time in ns; v2's cpu.max ("max 100000", or "QUOTA PERIOD")
// and cpu.stat's throttled_usec.
func readCPU(out *Cgroup, d string) {
	st := keyValues(filepath.Join(d, "cpu.stat"))
	out.CPUPeriods, out.CPUThrottled = st["nr_periods"], st["nr_throttled"]
	if ns, ok := st["throttled_time"]; ok {
		out.CPUThrottledSeconds = float64(ns) / 1e9
	} else {
		out.CPUThrottledSeconds = float64(st["throttled_usec"]) / 1e6
	}
	if q, ok := readInt(filepath.Join(d, "cpu.cfs_quota_us")); ok {
		if per, ok := readInt(filepath.Join(d, "cpu.cfs_period_us")); ok && q > 0 && per > 0 {
			out.CPUQuotaSeconds, out.CPUPeriodSeconds = float64(q)/1e6, float64(per)/1e6
		}
		return
	}
	if b, err := readCapped(filepath.Join(d, "cpu.max"), 64); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 && f[0] != "max" {
			q, err1 := strconv.ParseInt(f[0], 10, 64)
			per, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 == nil && err2 == nil && q > 0 && per > 0 {
				out.CPUQuotaSeconds, out.CPUPeriodSeconds = float64(q)/1e6, float64(per)/1e6
			}
		}
	}
}

// readIO reads the I/O limits on the process's cgroup: v1's
// blkio.throttle.* lines ("8:0 16"), v2's io.max lines other than
// unlimited ("8:0 rbps=max wbps=16 riops=max wiops=1").
func readIO(out *Cgroup, c cgroupFS, m membership) {
	if d := c.dir(m, "blkio"); d != "" {
		for _, f := range []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
			"blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"} {
			b, err := readCapped(filepath.Join(d, f), 4096)
			if err != nil {
				continue
			}
			for line := range strings.Lines(string(b)) {
				if l := strings.TrimSpace(line); l != "" && len(out.IOLimits) < 16 {
					out.IOPath = c.rel(d)
					out.IOLimits = append(out.IOLimits, strings.TrimPrefix(f, "blkio.throttle.")+" "+l)
				}
			}
		}
		return
	}
	if d := c.dir(m, "io"); d != "" {
		b, err := readCapped(filepath.Join(d, "io.max"), 4096)
		if err != nil {
			return
		}
		for line := range strings.Lines(string(b)) {
			if l := strings.TrimSpace(line); l != "" && len(out.IOLimits) < 16 {
				out.IOPath = c.rel(d)
				out.IOLimits = append(out.IOLimits, "io.max "+l)
			}
		}
	}
}

// pidsState reads the node's PID use: pid_max and threads-max against
// the threads that exist (each takes a PID: /proc/loadavg's fourth field
// counts them), and the PIDs of the kubelet's pods' cgroups: kubepods
// itself, and the pods nearest their limit or holding the most.
func (p Proc) pidsState(c cgroupFS) *PIDs {
	out := &PIDs{}
	if n, ok := readInt(p.path("sys", "kernel", "pid_max")); ok {
		out.Max = n
	}
	if n, ok := readInt(p.path("sys", "kernel", "threads-max")); ok {
		out.ThreadsMax = n
	}
	if b, err := readCapped(p.path("loadavg"), 256); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 4 {
			if _, total, ok := strings.Cut(f[3], "/"); ok {
				out.InUse, _ = strconv.ParseInt(total, 10, 64)
			}
		}
	}
	if c.root != "" {
		out.Cgroups = kubepodsPids(c)
	}
	if out.Max == 0 && out.InUse == 0 && len(out.Cgroups) == 0 {
		return nil
	}
	return out
}

// kubepodsBases are where the kubelet's pods' cgroups are, per driver
// (cgroupfs, systemd) and hierarchy (v1's pids, v2); a kubelet with a
// --cgroup-root puts them one level down (kubepodsUnderRoots).
var kubepodsBases = []string{"pids/kubepods", "pids/kubepods.slice", "kubepods", "kubepods.slice",
	"unified/kubepods", "unified/kubepods.slice"}

// kubepodsUnderRoots find the pods' cgroups of kubelets with a
// --cgroup-root of their own (kind's nodes, several kubelets on one host).
var kubepodsUnderRoots = []string{"pids/*/kubepods", "*/kubepods", "unified/*/kubepods"}

// podsShown bounds the pods' cgroups a recording keeps: those nearest
// their limit first, then those holding the most.
const podsShown = 3

// maxKubepods bounds the kubepods cgroups read when more than one kubelet
// has its own --cgroup-root.
const maxKubepods = 16

// kubepodsPids reads the PIDs of the kubelet's pods' cgroups: those at
// the hierarchy's root, or else the ones under a --cgroup-root nearest
// their limit (a node has one kubelet; a host running several, one each).
func kubepodsPids(c cgroupFS) []PidsCgroup {
	for _, base := range kubepodsBases {
		if out, ok := kubepodsAt(c, filepath.Join(c.root, base)); ok {
			return out
		}
	}
	var best []PidsCgroup
	read := 0
	for _, pattern := range kubepodsUnderRoots {
		dirs, _ := filepath.Glob(filepath.Join(c.root, pattern))
		for _, d := range dirs {
			if read == maxKubepods {
				return best
			}
			out, ok := kubepodsAt(c, d)
			if !ok {
				continue
			}
			read++
			if best == nil || share(out[0]) > share(best[0]) {
				best = out
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// kubepodsAt reads the kubepods cgroup d, and the pods below it nearest
// their limit or holding the most; false when d has no pids.current.
func kubepodsAt(c cgroupFS, d string) ([]PidsCgroup, bool) {
	cur, ok := readInt(filepath.Join(d, "pids.current"))
	if !ok {
		return nil, false
	}
	maxPids, _ := readInt(filepath.Join(d, "pids.max"))
	out := []PidsCgroup{{Of: "kubepods", Path: c.rel(d), Current: cur, Max: maxPids}}
	var pods []PidsCgroup
	dirs := []string{d}
	for i := 0; i < len(dirs) && i < maxPodCgroups; i++ {
		ents, err := os.ReadDir(dirs[i])
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			sub := filepath.Join(dirs[i], e.Name())
			uid, isPod := podUID(e.Name())
			switch {
			case isPod:
				cur, ok := readInt(filepath.Join(sub, "pids.current"))
				if ok {
					maxPids, _ := readInt(filepath.Join(sub, "pids.max"))
					pods = append(pods, PidsCgroup{Of: "pod", PodUID: uid, Path: c.rel(sub), Current: cur, Max: maxPids})
				}
			case i == 0 && len(dirs) < maxPodCgroups: // burstable, besteffort
				dirs = append(dirs, sub)
			}
		}
	}
	slices.SortFunc(pods, func(a, b PidsCgroup) int {
		return cmp.Or(cmp.Compare(share(b), share(a)), cmp.Compare(b.Current, a.Current), cmp.Compare(a.Path, b.Path))
	})
	return append(out, pods[:min(len(pods), podsShown)]...), true
}

// share is how near a cgroup is to its PID limit, 0 without one.
func share(c PidsCgroup) float64 {
	if c.Max <= 0 {
		return 0
	}
	return float64(c.Current) / float64(c.Max)
}

// podUID reads a pod's UID from its cgroup's name: "pod<uid>" (cgroupfs)
// or "kubepods-burstable-pod<uid with _>.slice" (systemd).
func podUID(name string) (string, bool) {
	i := strings.LastIndex(name, "pod")
	if i < 0 || (i > 0 && name[i-1] != '-') {
		return "", false
	}
	uid := strings.TrimSuffix(name[i+3:], ".slice")
	if len(uid) < 8 {
		return "", false
	}
	return strings.ReplaceAll(uid, "_", "-"), true
}
