// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	_ "embed"
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/kubeletpleg"
)

//go:embed node.html.tmpl
var nodeTemplate string

// nodeFuncs are what the node's part of a page needs.
var nodeFuncs = template.FuncMap{
	"mib":    func(n int64) int64 { return n >> 20 },
	"age":    age,
	"what":   what,
	"cgroup": cgroupLine,
}

// writeProcesses writes the processes a node's view holds: what each is
// to the containers, its state, where it waits, how long it has run, and
// for the runtime and the kubelet their wait for a CPU and their cgroups.
func writeProcesses(w *errWriter, ps *flightrec.Processes) {
	w.printf("\nProcesses (the runtime found by %s", cmpOr(ps.FoundBy, "nothing"))
	if ps.WindowSeconds > 0 {
		w.printf("; two looks %.1f s apart, * in D or T at both", ps.WindowSeconds)
	}
	if !ps.HostView && ps.WindowSeconds > 0 {
		w.printf("; not the host's processes: a pod without hostPID")
	}
	w.printf(")\n")
	t := w.table()
	t.row("  PID\tPPID\tROLE\tCOMM\tSTATE\tWCHAN\tAGE\tCPU\tRSS\tWHAT\n")
	children := 0
	for _, p := range ps.List {
		// The containers' own processes are many on a busy node: only
		// those stuck are shown, the rest counted.
		if p.Role == flightrec.RoleChild && !p.Held {
			children++
			continue
		}
		state := p.State
		if p.Held {
			state += "*"
		}
		t.row("  %d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2fs\t%d MiB\t%s\n", p.Pid, p.PPid, p.Role, p.Comm, state, p.WChan,
			age(p.AgeSeconds), p.CPUSeconds, p.RSSBytes>>20, what(p))
	}
	w.flush(t)
	if children > 0 {
		w.printf("  and %d of the containers' processes under the shims (-o json lists them)\n", children)
	}
	for _, p := range ps.List {
		if s := p.Sched; s != nil {
			w.printf("  %s (pid %d): over %.1f s its %d threads ran %.3f s and waited %.3f s for a CPU\n", p.Comm, p.Pid,
				s.WindowSeconds, s.Threads, s.RanSeconds, s.WaitedSeconds)
		}
		if c := p.Cgroup; c != nil {
			w.printf("  %s (pid %d): %s\n", p.Comm, p.Pid, cgroupLine(c))
		}
		if len(p.ThreadWaits) > 0 {
			var waits []string
			for k, n := range p.ThreadWaits {
				waits = append(waits, fmt.Sprintf("%d in %s", n, k))
			}
			w.printf("  %s (pid %d): %d threads in D: %s\n", p.Comm, p.Pid, p.ThreadsD, strings.Join(sorted(waits), ", "))
		}
	}
}

// what says what a process is doing, where its role tells: an OCI
// runtime's command, a CNI plugin's, a shim's container.
func what(p flightrec.Process) string {
	switch p.Role {
	case flightrec.RoleOCI:
		return strings.TrimSpace(p.Subcommand + " " + shortID(p.ID))
	case flightrec.RoleCNI:
		return strings.TrimSpace(p.Name + " " + p.CNICommand)
	case flightrec.RoleShim:
		return strings.Join(slices.DeleteFunc([]string{shortID(p.ID), p.Name, fmt.Sprintf("%d under it", p.Children)},
			func(s string) bool { return s == "" }), " ")
	}
	return ""
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func age(s float64) string {
	switch {
	case s == 0:
		return "-"
	case s < 100:
		return fmt.Sprintf("%.0fs", s)
	case s < 6000:
		return fmt.Sprintf("%.0fm", s/60)
	case s < 2*86400:
		return fmt.Sprintf("%.0fh", s/3600)
	}
	return fmt.Sprintf("%.0fd", s/86400)
}

func cgroupLine(c *flightrec.Cgroup) string {
	var parts []string
	if c.CPUPath != "" {
		s := "cpu " + c.CPUPath
		if c.CPUPeriodSeconds > 0 {
			s += fmt.Sprintf(" quota %g s of %g s", c.CPUQuotaSeconds, c.CPUPeriodSeconds)
		}
		if c.CPUPeriods > 0 {
			s += fmt.Sprintf(", throttled %d of %d periods", c.CPUThrottled, c.CPUPeriods)
		}
		parts = append(parts, s)
	}
	if c.PidsPath != "" {
		limit := "no limit"
		if c.PidsMax > 0 {
			limit = fmt.Sprintf("of %d", c.PidsMax)
		}
		parts = append(parts, fmt.Sprintf("pids %s %d %s", c.PidsPath, c.PidsCurrent, limit))
	}
	if len(c.IOLimits) > 0 {
		parts = append(parts, "io "+c.IOPath+" "+strings.Join(c.IOLimits, "; "))
	}
	return strings.Join(parts, "; ")
}

// writeHost writes the host's state: load, pressure, memory, PIDs,
// mounts, the kernel log.
func writeHost(w *errWriter, h *flightrec.Host) {
	w.printf("\nHost: load %.2f %.2f %.2f", h.Load[0], h.Load[1], h.Load[2])
	if h.PressureAbsent {
		w.printf("; no pressure stall information on this kernel")
	}
	for _, res := range []string{"cpu", "memory", "io"} {
		if p, ok := h.Pressure[res]; ok {
			w.printf("; %s pressure %.1f%%", res, p.SomeAvg10)
		}
	}
	w.printf("\n  memory available %d MiB of %d MiB, swap free %d MiB of %d MiB; %d mounts checked, %d not answering\n",
		h.Memory["MemAvailable"]>>20, h.Memory["MemTotal"]>>20, h.Memory["SwapFree"]>>20, h.Memory["SwapTotal"]>>20,
		h.MountsChecked, len(h.HungMounts))
	for _, m := range h.HungMounts {
		w.printf("  mount not answering: %s\n", m)
	}
	if p := h.PIDs; p != nil {
		w.printf("  PIDs: %d threads of pid_max %d and threads-max %d", p.InUse, p.Max, p.ThreadsMax)
		for _, c := range p.Cgroups {
			of := c.Of
			if c.PodUID != "" {
				of += " " + c.PodUID
			}
			w.printf("; %s %d", of, c.Current)
			if c.Max > 0 {
				w.printf(" of %d", c.Max)
			}
		}
		w.printf("\n")
	}
	if h.OOMKills > 0 {
		w.printf("  OOM kills since boot: %d\n", h.OOMKills)
	}
	for _, l := range h.KernelLog {
		w.printf("  kernel: %s\n", l)
	}
}

// writeKubelet writes the kubelet's own PLEG as its metrics told it.
func writeKubelet(w *errWriter, k *kubeletpleg.Reading) {
	w.printf("\nThe kubelet's PLEG, from %s\n", k.Source)
	if k.Error != "" {
		w.printf("  not read: %s\n", k.Error)
		return
	}
	if !k.LastSeen.IsZero() {
		w.printf("  last seen %.0f s ago (%s)\n", k.LastSeenAgeSeconds, k.LastSeen.UTC().Format("2006-01-02T15:04:05Z"))
	}
	w.printf("  relists %d since its start: p50 %.3f s, p99 %.3f s; intervals p99 %.3f s\n", k.Relists.Count,
		k.Relists.P50Seconds, k.Relists.P99Seconds, k.Intervals.P99Seconds)
	if r := k.RecentRelists; r != nil {
		w.printf("  relists over the last %.0f s: %d, p50 %.3f s, p99 %.3f s\n", k.RecentSinceSeconds, r.Count,
			r.P50Seconds, r.P99Seconds)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// writeNode writes a node's view below the CRI: its processes, its host
// and the kubelet's PLEG.
func writeNode(w *errWriter, rec *flightrec.Recording) {
	if ps := rec.Processes; ps != nil {
		writeProcesses(w, ps)
	}
	if h := rec.Host; h != nil {
		writeHost(w, h)
	}
	if k := rec.Kubelet; k != nil {
		writeKubelet(w, k)
	}
}
