// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/plegkit/pleg/flightrec"
)

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (v *nodeView) hungMounts() []string {
	if v.rec.Host == nil {
		return nil
	}
	return v.rec.Host.HungMounts
}

// mounts finds mounts that do not answer a stat, with the processes in D
// on a network file system beside them.
func (v *nodeView) mounts() []Finding {
	h := v.rec.Host
	if h == nil || len(h.HungMounts) == 0 {
		return nil
	}
	var waiting []string
	for _, p := range v.processes() {
		if p.State == "D" && processWait(p) == "netfs" || p.ThreadsD > 0 && processWait(p) == "netfs" {
			waiting = append(waiting, fmt.Sprintf("%s in %s", v.who(p), cmpOr(p.WChan, threadWaits(p))))
		}
	}
	title := fmt.Sprintf("Mount %s does not answer", strings.Join(h.HungMounts, ", "))
	if len(waiting) > 0 {
		title += fmt.Sprintf(": %d processes wait on it in D, %s among them", len(waiting),
			strings.SplitN(waiting[0], " in ", 2)[0])
	}
	ev := []string{fmt.Sprintf("statfs of %s had not returned by its deadline; %d mounts checked",
		strings.Join(h.HungMounts, ", "), h.MountsChecked)}
	ev = append(ev, waiting[:min(len(waiting), 6)]...)
	ev = append(ev, "every process that touches it (the runtime setting up or tearing down a pod that uses it, "+
		"runc, the kubelet's volume manager) waits in D, and the runtime's locks with them")
	return []Finding{{ID: "mount-hung", Severity: Critical, cause: true, Title: title, Evidence: ev,
		Action: "Bring its server back (the NFS server, the FUSE daemon) or force it away: umount -f -l " +
			h.HungMounts[0] + "; then the processes in D go on. Which pod uses it: findmnt " + h.HungMounts[0] +
			" and the pod volumes under /var/lib/kubelet/pods."}}
}

// pids finds the node's PIDs, or a pids cgroup's, near their end: fork
// and clone fail in the runtime, its shims and runc.
func (v *nodeView) pids() []Finding {
	h := v.rec.Host
	if h == nil || h.PIDs == nil {
		return nil
	}
	pp := h.PIDs
	type use struct {
		what         string
		current, max int64
	}
	var uses []use
	if pp.Max > 0 {
		uses = append(uses, use{"the node", pp.InUse, pp.Max})
	}
	if pp.ThreadsMax > 0 {
		uses = append(uses, use{"the node's threads (threads-max)", pp.InUse, pp.ThreadsMax})
	}
	for _, p := range v.processes() {
		if c := p.Cgroup; c != nil && c.PidsMax > 0 && (p.Role == flightrec.RoleRuntime || p.Role == flightrec.RoleKubelet) {
			uses = append(uses, use{fmt.Sprintf("%s's pids cgroup %s", v.who(p), c.PidsPath), c.PidsCurrent, c.PidsMax})
		}
	}
	var pods []string
	for _, c := range pp.Cgroups {
		if c.Of == "kubepods" && c.Max > 0 {
			uses = append(uses, use{"the pods' cgroup " + c.Path, c.Current, c.Max})
		}
		if c.Of == "pod" {
			pods = append(pods, fmt.Sprintf("%s holds %s PIDs (limit %s)", v.podByUID(c.PodUID), thousands(c.Current),
				limitWord(c.Max)))
		}
	}
	var out []Finding
	for _, u := range uses {
		share := float64(u.current) / float64(u.max)
		if share < pidsWarning {
			continue
		}
		sev := Warning
		if share >= pidsCritical {
			sev = Critical
		}
		ev := []string{fmt.Sprintf("%s PIDs in use of %s (%s); every thread takes one", thousands(u.current),
			thousands(u.max), percent(share)), fmt.Sprintf("kernel.pid_max %s, kernel.threads-max %s, threads %s",
			thousands(pp.Max), thousands(pp.ThreadsMax), thousands(pp.InUse))}
		ev = append(ev, pods...)
		out = append(out, Finding{ID: "pids-exhausted", Severity: sev, cause: true, Evidence: ev,
			Title: fmt.Sprintf("%s has used %s of %s PIDs: fork fails in the runtime and runc", capitalize(u.what),
				thousands(u.current), thousands(u.max)),
			Action: "Find what holds them (the pods above; ps -eLf | awk '{print $2}' | sort | uniq -c | sort -rn | head) " +
				"and stop it; give pods a limit (the kubelet's podPidsLimit) and the system a reserve " +
				"(--system-reserved=pid=N), or raise kernel.pid_max."})
		return out // one is enough: the node's use names the cgroups' too
	}
	for _, c := range pp.Cgroups {
		if c.Of == "pod" && c.Max > 0 && float64(c.Current) >= pidsCritical*float64(c.Max) {
			out = append(out, Finding{ID: "pod-pids-limit", Severity: Warning,
				Title: fmt.Sprintf("Pod %s has used %s of its %s PIDs", v.podByUID(c.PodUID), thousands(c.Current),
					thousands(c.Max)),
				Evidence: []string{"cgroup " + c.Path + ": fork fails in that pod alone (the kubelet's podPidsLimit)"},
				Action:   "Look at what the pod forks; raise its limit if that is its normal load."})
		}
	}
	return out
}

func (v *nodeView) podByUID(uid string) string {
	if p, ok := v.names.of(uid); ok {
		return p.String()
	}
	return "pod " + uid
}

func limitWord(n int64) string {
	if n <= 0 {
		return "none"
	}
	return thousands(n)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// oomLine picks the kernel's OOM kills: "Out of memory: Killed process
// 1234 (name)", "oom-kill:... task=name,pid=1234".
var oomLine = regexp.MustCompile(`(?i)(out of memory|oom-kill|killed process)`)

// killedName reads the name of the process an OOM kill line killed.
var killedName = regexp.MustCompile(`(?i)killed process \d+ \(([^)]*)\)|task=([^,\s]+)`)

// memory finds the node starved of memory: reclaim stalls (memory
// pressure), little memory available, OOM kills.
func (v *nodeView) memory() []Finding {
	h := v.rec.Host
	if h == nil {
		return nil
	}
	var ev []string
	sev := Severity("")
	raise := func(s Severity) {
		if sev == "" || s.rank() < sev.rank() {
			sev = s
		}
	}
	if p, ok := h.Pressure["memory"]; ok && p.SomeAvg10 >= pressureWarning {
		ev = append(ev, pressureLine("memory", p))
		raise(map[bool]Severity{true: Critical, false: Warning}[p.SomeAvg10 >= pressureCritical])
	}
	if total, avail := h.Memory["MemTotal"], h.Memory["MemAvailable"]; total > 0 {
		share := float64(avail) / float64(total)
		if share < memoryLow {
			raise(map[bool]Severity{true: Critical, false: Warning}[share < memoryCritical])
		}
		if sev != "" {
			ev = append(ev, fmt.Sprintf("%d MiB of %d MiB available (%s)", avail>>20, total>>20, percent(share)))
		}
	}
	var killed []string
	for _, l := range h.KernelLog {
		if oomLine.MatchString(l) {
			ev = append(ev, "kernel: "+l)
			if m := killedName.FindStringSubmatch(l); m != nil {
				killed = append(killed, cmpOr(m[1], m[2]))
			}
		}
	}
	for _, k := range killed {
		raise(Warning)
		if isRuntimeName(k) || k == "kubelet" {
			raise(Critical)
		}
	}
	if sev == "" {
		return nil
	}
	if h.OOMKills > 0 {
		ev = append(ev, fmt.Sprintf("%d OOM kills since boot (/proc/vmstat)", h.OOMKills))
	}
	title := "The node is starved of memory"
	if len(killed) > 0 {
		title += ": the kernel killed " + strings.Join(killed[:min(len(killed), 3)], ", ")
	}
	return []Finding{{ID: "memory-starved", Severity: sev, cause: sev == Critical, Title: title, Evidence: ev,
		Action: "Find what grew (the pods without memory limits: kubectl top pods -A --sort-by=memory; the page " +
			"cache; swap) and give the system a reserve (--system-reserved, --eviction-hard memory.available); the " +
			"runtime and the kubelet stall in reclaim, and one killed takes every pod's status with it."}}
}

func isRuntimeName(comm string) bool {
	for _, n := range []string{"containerd", "crio", "dockerd", "cri-dockerd", "conmon", "containerd-shim", "runc"} {
		if strings.HasPrefix(comm, n) {
			return true
		}
	}
	return false
}

func pressureLine(res string, p flightrec.Pressure) string {
	return fmt.Sprintf("/proc/pressure/%s: some avg10=%.2f avg60=%.2f avg300=%.2f, full avg10=%.2f",
		res, p.SomeAvg10, p.SomeAvg60, p.SomeAvg300, p.FullAvg10)
}

// disk finds the runtime waiting on the disk: its threads, or its
// shims' or runc's, in D in the block layer or a journal, its I/O
// throttled, the disk's pressure.
func (v *nodeView) disk() []Finding {
	var ev []string
	var first string
	// specific: the runtime's own processes wait on the disk, or its
	// cgroup throttles its I/O; io pressure alone is the node's.
	specific, throttledIO := false, false
	for _, p := range v.processes() {
		if p.Role == flightrec.RoleChild || p.Role == flightrec.RoleOther {
			continue
		}
		if (p.State == "D" || p.ThreadsD > 0) && processWait(p) == "disk" {
			specific = true
			waits := cmpOr(threadWaits(p), p.WChan)
			if p.State == "D" && p.WChan != "" && !strings.Contains(waits, p.WChan) {
				waits = p.WChan + "; " + waits
			}
			if first == "" {
				first = fmt.Sprintf("%s is waiting on the disk: %s in D (%s)", v.who(p),
					plural(max(p.ThreadsD, 1), "thread", "threads"), strings.Trim(waits, "; "))
			}
			ev = append(ev, describeProcess(p)+"; in D: "+strings.Trim(waits, "; "))
		}
		if c := p.Cgroup; c != nil && p.Role == flightrec.RoleRuntime && slowIO(c.IOLimits) {
			throttledIO = true
			ev = append(ev, fmt.Sprintf("%s's I/O cgroup %s throttles it: %s", v.who(p), c.IOPath,
				strings.Join(c.IOLimits, "; ")))
			if first == "" {
				first = fmt.Sprintf("%s's I/O is throttled: %s", v.who(p), c.IOLimits[0])
			}
		}
	}
	sev := Severity("")
	if specific {
		sev = Critical
	} else if first != "" {
		sev = Warning
	}
	if h := v.rec.Host; h != nil {
		if p, ok := h.Pressure["io"]; ok && p.SomeAvg10 >= pressureWarning {
			ev = append(ev, pressureLine("io", p))
			if first == "" {
				first = fmt.Sprintf("The disk is saturated: io pressure %.0f%%", p.SomeAvg10)
				sev = map[bool]Severity{true: Critical, false: Warning}[p.SomeAvg10 >= pressureCritical]
			}
		}
		for _, l := range h.KernelLog {
			if strings.Contains(l, "blocked for more than") {
				ev = append(ev, "kernel: "+l)
			}
		}
	}
	if sev == "" {
		return nil
	}
	return []Finding{{ID: "disk-saturated", Severity: sev, cause: specific || throttledIO || sev == Critical, Title: first,
		Evidence: ev[:min(len(ev), 10)],
		Action: fmt.Sprintf("The runtime writes its state under %s with fsync, holding a lock the lists wait on. Find the "+
			"heavy writers (iotop -o, /proc/PID/io) and the device (iostat -x 1), cgroup I/O limits on the runtime "+
			"(blkio.throttle.* or io.max), and the kernel log (dmesg -T).", v.rt.root)}}
}

// slowIO tells I/O limits that make writes wait: a throttle below
// slowIOBytes or slowIOOps a second.
func slowIO(limits []string) bool {
	for _, l := range limits {
		for f := range strings.FieldsSeq(l) {
			_, val, _ := strings.Cut(f, "=") // v2: wbps=16; v1: the last field is the value
			if val == "" {
				val = f
			}
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			if strings.Contains(l, "iops") && n < slowIOOps || !strings.Contains(l, "iops") && n < slowIOBytes {
				return true
			}
		}
	}
	return false
}

// starved tells how starved of CPU a process was over the window: the
// share of the time it wanted a CPU that it waited, and whether that
// counts.
func starved(p flightrec.Process) (share float64, ok bool) {
	s := p.Sched
	if s == nil || s.WaitedSeconds < starvedMin {
		return 0, false
	}
	share = s.WaitedSeconds / (s.WaitedSeconds + s.RanSeconds)
	return share, share >= starvedShare
}

// throttled tells a process held back by its cgroup's CPU quota.
func throttled(p flightrec.Process) (string, bool) {
	c := p.Cgroup
	if c == nil || c.CPUPeriodSeconds == 0 {
		return "", false
	}
	quota := fmt.Sprintf("its cgroup %s allows %s of CPU every %s", c.CPUPath, fmtCPU(c.CPUQuotaSeconds),
		fmtCPU(c.CPUPeriodSeconds))
	switch {
	case c.WindowPeriods > 0 && float64(c.WindowThrottled) >= throttledShare*float64(c.WindowPeriods):
		return quota + fmt.Sprintf(", and held it back in %d of its %d periods over the probe's window",
			c.WindowThrottled, c.WindowPeriods), true
	case c.CPUQuotaSeconds/c.CPUPeriodSeconds < tinyQuota && c.CPUThrottled > 0:
		return quota + fmt.Sprintf(" (%s of a CPU), and held it back in %d of %d periods", percent(
			c.CPUQuotaSeconds/c.CPUPeriodSeconds), c.CPUThrottled, c.CPUPeriods), true
	}
	return "", false
}

func fmtCPU(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.3g ms", s*1000)
	}
	return fmt.Sprintf("%.3g s", s)
}

// runtimeCPU finds the runtime, or docker's daemons, starved of CPU:
// waiting for one most of the time it wanted one, or held back by its
// cgroup's quota.
func (v *nodeView) runtimeCPU() []Finding {
	var out []Finding
	for _, p := range v.processes() {
		if p.Role != flightrec.RoleRuntime && p.Role != flightrec.RoleEngine {
			continue
		}
		share, isStarved := starved(p)
		quota, isThrottled := throttled(p)
		if !isStarved && !isThrottled {
			continue
		}
		var ev []string
		title := v.who(p) + " is starved of CPU"
		if p.Sched != nil {
			ev = append(ev, fmt.Sprintf("over %s its %d threads waited %s for a CPU and ran %s (%s of the time they wanted "+
				"one waiting)", fmtSeconds(p.Sched.WindowSeconds), p.Sched.Threads, fmtSeconds(p.Sched.WaitedSeconds),
				fmtSeconds(p.Sched.RanSeconds), percent(share)))
			if isStarved {
				title += fmt.Sprintf(": it waited %s of the time it wanted to run", percent(share))
			}
		}
		if isThrottled {
			ev = append(ev, quota)
			if !isStarved {
				title += ": " + quota
			}
		}
		ev = append(ev, v.answers.describe())
		sev := Warning
		if isThrottled && (!v.answers.reachable || share >= 0.9) || share >= 0.9 {
			sev = Critical
		}
		out = append(out, Finding{ID: "runtime-cpu-starved", Severity: sev, cause: true, Title: title, Evidence: ev,
			Action: "Lift the CPU quota on the runtime's cgroup (cpu.cfs_quota_us -1, or cpu.max max) or find what takes " +
				"the CPUs (top; the pods without CPU limits); keep CPUs for the system (--system-reserved cpu, " +
				"--kube-reserved) so that the runtime and the kubelet always run."})
	}
	return out
}

// cpu finds the node's CPUs saturated: tasks waiting for a CPU most of
// the time (cpu pressure), the kubelet's and the runtime's waits beside.
func (v *nodeView) cpu() []Finding {
	h := v.rec.Host
	if h == nil {
		return nil
	}
	p, ok := h.Pressure["cpu"]
	if !ok || p.SomeAvg10 < pressureWarning {
		return nil
	}
	sev := Warning
	if p.SomeAvg10 >= pressureCritical {
		sev = Critical
	}
	ev := []string{pressureLine("cpu", p), fmt.Sprintf("load %.2f %.2f %.2f", h.Load[0], h.Load[1], h.Load[2])}
	for _, pr := range v.processes() {
		if pr.Sched != nil && (pr.Role == flightrec.RoleRuntime || pr.Role == flightrec.RoleKubelet) {
			share, _ := starved(pr)
			ev = append(ev, fmt.Sprintf("%s waited %s for a CPU over %s (%s of the time it wanted one)", v.who(pr),
				fmtSeconds(pr.Sched.WaitedSeconds), fmtSeconds(pr.Sched.WindowSeconds), percent(share)))
		}
	}
	return []Finding{{ID: "cpu-starved", Severity: sev, Evidence: ev,
		Title: fmt.Sprintf("The node's CPUs are saturated: cpu pressure %.0f%%", p.SomeAvg10),
		Action: "Find what takes the CPUs (top; kubectl top pods -A --sort-by=cpu; the pods without CPU limits) and " +
			"keep CPUs for the system (--system-reserved cpu, --kube-reserved): the runtime and the kubelet wait " +
			"for a CPU like any task."}}
}

// kernelLog tells the kernel log's lines no other finding took.
func (v *nodeView) kernelLog() []Finding {
	h := v.rec.Host
	if h == nil {
		return nil
	}
	var rest []string
	for _, l := range h.KernelLog {
		if !oomLine.MatchString(l) && !strings.Contains(l, "blocked for more than") {
			rest = append(rest, l)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	return []Finding{{ID: "kernel-log", Severity: Warning, Evidence: rest[:min(len(rest), 8)],
		Title: fmt.Sprintf("The kernel logged %s of I/O or file system errors around the onset",
			plural(len(rest), "line", "lines")),
		Action: "Read the whole kernel log around the onset (dmesg -T)."}}
}
