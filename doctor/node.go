// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/runtime"
)

// NodeProber reads the node below the CRI now: *flightrec.NodeProbe,
// whose Snapshot is the flight recorder's probes taken live.
type NodeProber interface {
	Snapshot(ctx context.Context) *flightrec.Recording
}

// Thresholds of the findings below the CRI.
const (
	// commandStuck is the age past which an OCI runtime's command (runc
	// kill, create, delete ...) or a CNI plugin is stuck: each takes a
	// fraction of a second when all is well. commandHung is where it has
	// outlived the kubelet's runtime request timeout.
	commandStuck = flightrec.StuckCommandAge
	commandHung  = 2 * time.Minute
	// shimIdle is how long a shim may live without a process under it:
	// its containers gone, it should exit.
	shimIdle = time.Minute
	// starvedShare is the share of the time a process wanted a CPU that
	// it waited for one, past which it is starved; starvedMin is the
	// least wait over the window for that to count, so that a process
	// that barely ran does not make a figure of noise.
	starvedShare = 0.5
	starvedMin   = 0.1 // seconds
	// throttledShare is the share of its cgroup's periods in which its
	// CPU quota ran out, past which a process is held back by it;
	// tinyQuota is a quota of less than this share of a CPU, which holds
	// back anything that wants to run.
	throttledShare = 0.5
	tinyQuota      = 0.05
	// pidsWarning and pidsCritical are the shares of a PID limit used.
	pidsWarning  = 0.8
	pidsCritical = 0.95
	// memoryLow and memoryCritical are MemAvailable's share of MemTotal.
	memoryLow      = 0.05
	memoryCritical = 0.02
	// kubeletBehind is the age of the kubelet's last seen PLEG past which
	// it is behind (the kubelet relists every second), kubeletCritical
	// where a third of its 3-minute threshold is gone; with EventedPLEG,
	// both past its 5-minute relist period.
	kubeletBehind   = 30 * time.Second
	kubeletCritical = 60 * time.Second
	// slowIOBytes and slowIOOps are I/O throttles that make a runtime's
	// writes wait: below a MiB or a hundred operations a second.
	slowIOBytes = 1 << 20
	slowIOOps   = 100
)

// nodeView is what the findings below the CRI judge: a node as the flight
// recorder's probes saw it (a recording, or doctor's live view), and what
// is known beside it of the runtime's answers and the pods' names.
type nodeView struct {
	rec *flightrec.Recording
	rt  runtimeKind
	// answers is how the runtime answered: doctor's own calls (live), or
	// pleg's (a recording).
	answers runtimeAnswers
	names   podNames
	// byPid are the processes seen.
	byPid map[int]flightrec.Process
}

// runtimeAnswers is how the runtime answered the CRI.
type runtimeAnswers struct {
	// known tells anything is known: a recording without pleg's part
	// tells nothing.
	known     bool
	reachable bool
	// listP50 is the slower whole-node list's median.
	listP50 time.Duration
	// hungPods are the pods whose calls got no answer.
	hungPods []string
}

// quick tells the runtime answered its lists quickly: a kubelet whose
// PLEG is behind then has the cause in itself.
func (a runtimeAnswers) quick() bool {
	return a.known && a.reachable && a.listP50 < slowList && len(a.hungPods) == 0
}

func (a runtimeAnswers) describe() string {
	switch {
	case !a.known:
		return "how the runtime answers is not known"
	case !a.reachable:
		return "the runtime does not answer"
	case len(a.hungPods) > 0:
		return "the runtime does not answer for " + strings.Join(a.hungPods, ", ")
	}
	return "the runtime answers its lists in " + fmtDuration(a.listP50)
}

// podNames names pods by UID and by their sandboxes' and containers' IDs.
type podNames map[string]PodRef

// of is the pod of a UID or ID, or of an ID's prefix as short IDs give
// them; ok is false when unknown.
func (n podNames) of(id string) (PodRef, bool) {
	if id == "" {
		return PodRef{}, false
	}
	p, ok := n[id]
	return p, ok
}

// nodeFindings are the findings of a node's view, the cause first.
func nodeFindings(v *nodeView) []Finding {
	v.byPid = map[int]flightrec.Process{}
	if ps := v.rec.Processes; ps != nil {
		for _, p := range ps.List {
			v.byPid[p.Pid] = p
		}
	}
	var out []Finding
	out = append(out, v.stopped()...)
	out = append(out, v.notRunning()...)
	out = append(out, v.mounts()...)
	out = append(out, v.pids()...)
	out = append(out, v.commands()...)
	out = append(out, v.memory()...)
	out = append(out, v.disk()...)
	out = append(out, v.runtimeCPU()...)
	out = append(out, v.kubelet()...)
	out = append(out, v.cpu()...)
	out = append(out, v.shims()...)
	out = append(out, v.inD()...)
	if v.rec.Runtime != nil {
		if f, ok := lockFinding(v.rec.Runtime, v.rt); ok {
			out = append(out, f)
		}
	}
	out = append(out, v.kernelLog()...)
	out = append(out, v.zombies()...)
	out = append(out, kubeletReadFinding(v.rec.Kubelet)...)
	out = append(out, plegFindings(v.rec)...)
	out = append(out, partFindings(v.rec, v.rt)...)
	for i := range out {
		out[i].Title = sentence(out[i].Title)
	}
	rankFindings(out)
	return out
}

// liveView is doctor's view of its own report's node.
func liveView(r *Report) *nodeView {
	comm := ""
	if r.Node.Processes != nil {
		for _, p := range r.Node.Processes.List {
			if p.Role == flightrec.RoleRuntime {
				comm = p.Comm
			}
		}
	}
	v := &nodeView{rec: r.Node, rt: kindOf(r.Runtime.Name, comm, r.Endpoint), names: r.names}
	v.answers = runtimeAnswers{known: true, reachable: r.Runtime.Reachable}
	for _, op := range r.Operations {
		if op.Name == runtime.OpListPodSandbox || op.Name == runtime.OpListContainers {
			v.answers.listP50 = max(v.answers.listP50, time.Duration(op.P50Seconds*float64(time.Second)))
		}
	}
	for _, l := range r.Lists {
		if l.Error != "" {
			v.answers.reachable = false
		}
	}
	for _, p := range r.pods {
		if p.hung() {
			v.answers.hungPods = append(v.answers.hungPods, p.pod.String())
		}
	}
	return v
}

// recordingView is a flight recording's view: the runtime's answers are
// pleg's calls the recording kept.
func recordingView(rec *flightrec.Recording) *nodeView {
	name, comm, endpoint := "", "", ""
	if rec.Runtime != nil {
		name, endpoint = rec.Runtime.Name, rec.Runtime.Endpoint
	}
	if rec.Processes != nil {
		for _, p := range rec.Processes.List {
			if p.Role == flightrec.RoleRuntime {
				comm = p.Comm
			}
		}
	}
	v := &nodeView{rec: rec, rt: kindOf(name, comm, endpoint)}
	pv := rec.Pleg
	if pv == nil {
		return v
	}
	v.answers = runtimeAnswers{known: true, reachable: true}
	for _, p := range rec.Parts {
		if p.Name == flightrec.PartVersion && (p.TimedOut || p.Error != "") {
			v.answers.reachable = false
		}
	}
	var lists []time.Duration
	for _, c := range pv.Recent {
		if c.Op == runtime.OpListPodSandbox || c.Op == runtime.OpListContainers {
			lists = append(lists, time.Duration(c.Seconds*float64(time.Second)))
		}
	}
	for _, c := range pv.InFlight {
		if c.Op == runtime.OpListPodSandbox || c.Op == runtime.OpListContainers {
			lists = append(lists, time.Duration(c.Seconds*float64(time.Second)))
		}
	}
	if len(lists) > 0 {
		slices.Sort(lists)
		v.answers.listP50 = lists[len(lists)/2]
	}
	if st := pv.Status; st != nil {
		for _, f := range st.FailingPods {
			if f.Deadline {
				v.answers.hungPods = append(v.answers.hungPods, PodRef{UID: f.UID, Name: f.Name,
					Namespace: f.Namespace}.String())
			}
		}
	}
	return v
}

// who names a process for a title: "containerd (pid 1234)", "the shim
// containerd-shim (pid 4321) of pod ns/name".
func (v *nodeView) who(p flightrec.Process) string {
	switch p.Role {
	case flightrec.RoleRuntime:
		return fmt.Sprintf("%s (pid %d)", p.Comm, p.Pid)
	case flightrec.RoleEngine:
		return fmt.Sprintf("docker's %s (pid %d)", p.Comm, p.Pid)
	case flightrec.RoleShim:
		return fmt.Sprintf("the shim %s (pid %d)%s", p.Comm, p.Pid, v.ofPod(p))
	case flightrec.RoleOCI:
		return fmt.Sprintf("%s (pid %d)", cmpOr(baseName(p.Args0), p.Comm), p.Pid)
	case flightrec.RoleCNI:
		return fmt.Sprintf("the CNI plugin %s (pid %d)", cmpOr(p.Name, p.Comm), p.Pid)
	case flightrec.RoleKubelet:
		return fmt.Sprintf("the kubelet (pid %d)", p.Pid)
	}
	return fmt.Sprintf("process %s (pid %d)%s", p.Comm, p.Pid, v.ofPod(p))
}

// ofPod is " of pod ns/name" for a process whose pod is known: a shim's
// id, an OCI runtime's container, a container's process's shim.
func (v *nodeView) ofPod(p flightrec.Process) string {
	for range 16 {
		if pod, ok := v.names.of(p.ID); ok {
			return " of pod " + pod.String()
		}
		if p.Role == flightrec.RoleShim && p.Name != "" {
			if pod, ok := podOfContainerName(p.Name); ok {
				return " of pod " + pod
			}
		}
		if p.Role == flightrec.RoleShim {
			if p.ID != "" && p.Comm == "conmon" {
				return " of container " + shortID(p.ID)
			}
			if p.ID != "" {
				return " of sandbox " + shortID(p.ID)
			}
			return ""
		}
		parent, ok := v.byPid[p.PPid]
		if !ok {
			return ""
		}
		p = parent
	}
	return ""
}

// podOfContainerName reads the pod from a container's name as the
// kubelet made it for CRI-O's conmon: k8s_CONTAINER_POD_NAMESPACE_UID_N.
func podOfContainerName(name string) (string, bool) {
	f := strings.Split(name, "_")
	if len(f) < 6 || f[0] != "k8s" {
		return "", false
	}
	return f[3] + "/" + f[2], true
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sentence starts a title that begins with a process's description with
// a capital where it begins with a word, not a program's name.
func sentence(s string) string {
	for _, w := range []string{"the ", "process ", "docker's "} {
		if strings.HasPrefix(s, w) {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return s
}

// describeProcess is a process's line of evidence.
func describeProcess(p flightrec.Process) string {
	s := fmt.Sprintf("pid %d %s, role %s, state %s", p.Pid, p.Comm, p.Role, p.State)
	if p.Held {
		s += " at both looks"
	}
	if p.WChan != "" {
		s += fmt.Sprintf(", wait channel %s", p.WChan)
	}
	if p.AgeSeconds > 0 {
		s += ", running for " + fmtSeconds(p.AgeSeconds)
	}
	if p.RSSBytes > 0 || p.CPUSeconds > 0 {
		s += fmt.Sprintf(", %.2f s of CPU, %d MiB resident", p.CPUSeconds, p.RSSBytes>>20)
	}
	return s
}

// stackLine is a process's kernel stack on one line, when read.
func stackLine(p flightrec.Process) (string, bool) {
	s := strings.TrimSpace(p.KernelStack)
	if s == "" {
		return "", false
	}
	return "kernel stack: " + strings.Join(firstLines(s, 6), " | "), true
}

// waitKind classifies where a process in D waits, from its wait channel
// or kernel stack: "disk" (the block layer, a journal, writeback), "netfs"
// (NFS, FUSE, CephFS, SMB, 9p), "freezer" (a frozen cgroup), or "".
func waitKind(w string) string {
	w = strings.ToLower(w)
	for _, k := range []struct {
		kind  string
		words []string
	}{
		{"freezer", []string{"refrigerator", "freezer"}},
		{"netfs", []string{"nfs", "rpc_", "fuse", "request_wait_answer", "ceph", "cifs", "smb", "p9_", "v9fs"}},
		{"disk", []string{"io_schedule", "jbd2", "wait_on_page", "folio_wait", "buffer", "blk_", "rq_qos", "wbt_",
			"balance_dirty", "submit_bio", "xfs", "ext4", "btrfs", "writeback", "fsync", "bit_wait_io",
			"wait_for_completion_io", "blkdev", "wb_wait", "sync_inodes"}},
	} {
		for _, word := range k.words {
			if strings.Contains(w, word) {
				return k.kind
			}
		}
	}
	return ""
}

// processWait is where a process, or its threads in D, wait.
func processWait(p flightrec.Process) string {
	if k := waitKind(p.WChan); k != "" {
		return k
	}
	for w := range p.ThreadWaits {
		if k := waitKind(w); k != "" {
			return k
		}
	}
	return waitKind(p.KernelStack)
}

// threadWaits says a process's threads' waits: "3 in jbd2_log_wait_commit".
func threadWaits(p flightrec.Process) string {
	var parts []string
	for w, n := range p.ThreadWaits {
		parts = append(parts, fmt.Sprintf("%d in %s", n, w))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// fmtSeconds says a time in seconds as an operator reads it: 95 s, 12 min.
func fmtSeconds(s float64) string {
	switch {
	case s < 1:
		return fmt.Sprintf("%.3g ms", s*1000)
	case s < 10:
		return fmt.Sprintf("%.1f s", s)
	case s < 600:
		return fmt.Sprintf("%.0f s", s)
	case s < 2*3600:
		return fmt.Sprintf("%.0f min", s/60)
	}
	return fmt.Sprintf("%.1f h", s/3600)
}

func fmtDuration(d time.Duration) string {
	if d < time.Second {
		return fmtSeconds(d.Seconds())
	}
	return fmtSeconds(d.Seconds())
}

// thousands writes n with thousands separators: 32,768.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// percent is a share as a percentage.
func percent(share float64) string {
	if math.IsNaN(share) || math.IsInf(share, 0) {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*share)
}

func firstLines(s string, n int) []string {
	lines := strings.Split(s, "\n")
	return lines[:min(len(lines), n)]
}
