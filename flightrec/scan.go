// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Roles of the processes a scan lists.
const (
	// RoleRuntime is the CRI runtime: the owner of its socket, else found
	// by name (containerd, crio, cri-dockerd).
	RoleRuntime = "runtime"
	// RoleEngine is a daemon the runtime drives: docker's dockerd, and
	// its containerd, under cri-dockerd.
	RoleEngine = "engine"
	// RoleShim is a container's shim: containerd-shim-*, conmon.
	RoleShim = "shim"
	// RoleOCI is an OCI runtime's command (runc, crun, runsc, ...): each
	// lives for one command, a fraction of a second when all is well.
	RoleOCI = "oci"
	// RoleCNI is a CNI plugin the runtime runs to set up or tear down a
	// pod's network: it lives for one command too.
	RoleCNI = "cni"
	// RoleKubelet is the kubelet.
	RoleKubelet = "kubelet"
	// RoleChild is a process under a shim: a container's.
	RoleChild = "child"
	// RoleOther is any other process in D or T at both looks.
	RoleOther = "other"
)

// StuckCommandAge is the age past which an OCI runtime's command (runc
// create, kill, delete ...) or a CNI plugin is stuck: each lasts a
// fraction of a second when all is well.
const StuckCommandAge = 30 * time.Second

// runtimeNames are the comms of the CRI runtimes' processes, engineNames
// those of the daemons cri-dockerd drives, shimNames those of their shims
// and ociNames those of the OCI runtimes.
var (
	runtimeNames = []string{"containerd", "crio", "cri-dockerd"}
	engineNames  = []string{"dockerd"}
	shimNames    = []string{"containerd-shim-runc-v2", "containerd-shim", "containerd-shim-runsc-v1",
		"containerd-shim-kata-v2", "conmon"}
	ociNames = []string{"runc", "crun", "runsc", "youki", "kata-runtime"}
	// cniDirs are where CNI plugins are installed: the CNI project's
	// default, distributions' and k3s'.
	cniDirs = []string{"/opt/cni/bin/", "/usr/lib/cni/", "/usr/libexec/cni/", "/usr/lib/cni-plugins/",
		"/var/lib/rancher/k3s/data/"}
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

// isOCI tells an OCI runtime's comm: runc's stages while it sets up a
// container are "runc:[0:PARENT]", "runc:[1:CHILD]" and "runc:[2:INIT]".
// runsc's long-lived processes (runsc-sandbox, runsc-gofer) are not
// commands, and their comms differ.
func isOCI(comm string) bool {
	return slices.Contains(ociNames, comm) || strings.HasPrefix(comm, "runc:[")
}

// scanOptions say what a scan looks for.
type scanOptions struct {
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
	// cmdlines, if set, keeps the shims' command lines across looks.
	cmdlines *cmdlineCache
	// full lists what a recording keeps beside the runtime and its
	// shims: the kubelet, docker's daemons, the OCI runtimes' commands
	// and CNI plugins the runtime and shims run, the shims' other
	// descendants, every process in D or T at both looks, and the
	// scheduler's and cgroups' figures of the runtime and the kubelet.
	full bool
	// window is the time between the two looks of a full scan, over
	// which the scheduler's figures are taken; 0 takes one look.
	window time.Duration
	// cgroup reads the processes' cgroups.
	cgroup cgroupFS
	// now is the clock.
	now func() time.Time
	// afterFirst, if set, is called after the first look: tests change
	// their /proc tree there, as time changes the host's.
	afterFirst func()
}

// look is the stat of every process at one moment.
type look struct {
	at    time.Time
	pids  []int
	stats map[int]stat
}

func (p Proc) look(now func() time.Time) (look, error) {
	pids, err := p.pids()
	if err != nil {
		return look{}, err
	}
	l := look{at: now(), pids: pids, stats: make(map[int]stat, len(pids))}
	for _, pid := range pids {
		if st, err := p.readStat(pid); err == nil {
			l.stats[pid] = st
		}
	}
	return l, nil
}

// keyProcess is a process whose scheduling and cgroups a full scan
// reads at both looks: the runtime, the kubelet, docker's daemons.
type keyProcess struct {
	pid   int
	start uint64
	ran   uint64
	wait  uint64
	ok    bool
	cpu   *Cgroup
}

// scan finds the runtime's process (the owner of the socket, else by
// name) and its shims (those whose command line names the socket, or
// every shim when none does, as conmon's do not) and, for a full scan,
// what scanOptions.full lists; it reads each under perProcess, and lists
// at most maxProcesses. A full scan takes two looks window apart: a
// process in D or T at both is stuck, not passing through.
func (p Proc) scan(ctx context.Context, o scanOptions) (*Processes, error) {
	if o.now == nil {
		o.now = time.Now
	}
	first, err := p.look(o.now)
	if err != nil {
		return nil, err
	}
	out := &Processes{HostView: first.stats[2].comm == "kthreadd"}
	runtimePid := p.findRuntime(o, first.pids, first.stats, out)
	var keys map[int]*keyProcess
	second, twoLooks := first, false
	if o.full {
		keys = p.keyProcesses(runtimePid, first, o.cgroup)
		if o.afterFirst != nil {
			o.afterFirst()
		}
		if o.window > 0 {
			// The window is measured on the monotonic clock, as the
			// kernel's scheduling figures are: o.now may be a test's.
			start := time.Now()
			t := time.NewTimer(o.window)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			if l, err := p.look(o.now); err == nil {
				second, twoLooks = l, true
				out.WindowSeconds = time.Since(start).Seconds()
			}
		}
	}
	roles, order := p.pick(o, runtimePid, first, second)
	children := map[int]int{}
	for _, pid := range second.pids {
		children[second.stats[pid].ppid]++
	}
	boot, bootErr := p.bootTime()
	for _, pid := range order {
		role := roles[pid]
		if !o.full && (role == RoleOCI || role == RoleCNI) && (bootErr != nil ||
			second.at.Sub(boot.Add(time.Duration(second.stats[pid].startTick)*time.Second/userHZ)) < StuckCommandAge) {
			continue // a command passing through, as they all do
		}
		pr, ok := p.processWithin(pid, role, o.perProcess)
		if !ok {
			continue
		}
		st := second.stats[pid]
		if pr.TimedOut {
			pr.Comm, pr.State, pr.PPid = st.comm, st.state, st.ppid
		}
		if bootErr == nil && st.startTick > 0 {
			pr.StartedAt = boot.Add(time.Duration(st.startTick) * time.Second / userHZ)
			pr.AgeSeconds = max(0, second.at.Sub(pr.StartedAt).Seconds())
		}
		if f, ok := first.stats[pid]; ok && f.startTick == st.startTick && f.state == st.state &&
			(st.state == "D" || st.state == "T" || st.state == "t") && twoLooks {
			pr.Held = true
		}
		if (o.full || role == RoleCNI) && !p.describe(&pr, o, st.startTick) {
			continue
		}
		if pr.Role == RoleShim {
			pr.Children = children[pid]
		}
		if k := keys[pid]; k != nil && k.start == st.startTick {
			p.schedule(&pr, k, o, out.WindowSeconds)
		}
		out.List = append(out.List, pr)
	}
	return out, nil
}

// keyProcesses reads the scheduling and cpu cgroup of the runtime, the
// kubelet and docker's daemons at a look.
func (p Proc) keyProcesses(runtimePid int, l look, cg cgroupFS) map[int]*keyProcess {
	keys := map[int]*keyProcess{}
	add := func(pid int) {
		if pid == 0 || keys[pid] != nil {
			return
		}
		k := &keyProcess{pid: pid, start: l.stats[pid].startTick}
		var err error
		k.ran, k.wait, _, err = p.schedstat(pid)
		k.ok = err == nil
		k.cpu = p.cgroups(pid, cg, false)
		keys[pid] = k
	}
	add(runtimePid)
	for _, pid := range l.pids {
		if c := l.stats[pid].comm; c == "kubelet" || slices.Contains(engineNames, c) {
			add(pid)
		}
	}
	return keys
}

// schedule sets what the scheduler did with a key process between the
// looks, and its cgroups as the second look saw them.
func (p Proc) schedule(pr *Process, k *keyProcess, o scanOptions, window float64) {
	cg := p.cgroups(pr.Pid, o.cgroup, true)
	if cg != nil && k.cpu != nil && cg.CPUPeriods >= k.cpu.CPUPeriods && cg.CPUThrottled >= k.cpu.CPUThrottled {
		cg.WindowPeriods, cg.WindowThrottled = cg.CPUPeriods-k.cpu.CPUPeriods, cg.CPUThrottled-k.cpu.CPUThrottled
	}
	pr.Cgroup = cg
	if window <= 0 || !k.ok {
		return
	}
	ran, wait, threads, err := p.schedstat(pr.Pid)
	if err != nil {
		return
	}
	// A thread that exited between the looks takes its counts with it:
	// never below zero.
	pr.Sched = &Sched{WindowSeconds: window, Threads: threads,
		RanSeconds:    float64(max(ran, k.ran)-k.ran) / 1e9,
		WaitedSeconds: float64(max(wait, k.wait)-k.wait) / 1e9}
}

// pick picks the processes to list and their roles, in the order they
// are listed: the runtime, the kubelet, docker's daemons, the shims, the
// commands the runtime and shims run, the processes in D or T at both
// looks, and the shims' other descendants last, as they are many.
func (p Proc) pick(o scanOptions, runtimePid int, first, second look) (map[int]string, []int) {
	roles := map[int]string{}
	var order []int
	add := func(pid int, role string) {
		if _, ok := roles[pid]; !ok && len(order) < maxProcesses {
			roles[pid] = role
			order = append(order, pid)
		}
	}
	if runtimePid != 0 {
		add(runtimePid, RoleRuntime)
	}
	st := second.stats
	if o.full {
		for _, pid := range p.kubelets(o, second) {
			add(pid, RoleKubelet)
		}
		for _, pid := range second.pids {
			switch c := st[pid].comm; {
			case slices.Contains(engineNames, c),
				c == "containerd" && runtimePid != 0 && st[runtimePid].comm == "cri-dockerd":
				add(pid, RoleEngine)
			}
		}
	}
	shims := p.findShims(o, second.pids, st)
	for _, pid := range shims {
		add(pid, RoleShim)
	}
	children := map[int][]int{}
	for _, pid := range second.pids {
		children[st[pid].ppid] = append(children[st[pid].ppid], pid)
	}
	if !o.full {
		// The recorder's looks: the commands the runtime and its shims
		// run, which scan keeps only when they have lived too long.
		for _, pid := range slices.Clone(order) {
			for _, c := range children[pid] {
				switch {
				case roles[pid] == RoleShim && isOCI(st[c].comm):
					add(c, RoleOCI)
				case roles[pid] == RoleRuntime && !isShim(st[c].comm):
					add(c, RoleCNI)
				}
			}
		}
		return roles, order
	}
	// The runtime's and the engines' own children: OCI runtimes and CNI
	// plugins (describe tells which; the rest is dropped). The shims'
	// descendants: their OCI runtimes now, the containers' processes
	// after the stuck ones.
	var under []int
	isUnder := map[int]bool{}
	for _, pid := range slices.Clone(order) {
		for _, c := range children[pid] {
			switch {
			case roles[pid] == RoleShim:
				under = append(under, c)
			case (roles[pid] == RoleRuntime || roles[pid] == RoleEngine) && !isShim(st[c].comm):
				add(c, RoleCNI) // a candidate: describe keeps CNI plugins and OCI runtimes
			}
		}
	}
	for i := 0; i < len(under) && i < 8*maxProcesses; i++ {
		isUnder[under[i]] = true
		if isOCI(st[under[i]].comm) {
			add(under[i], RoleOCI)
		}
		under = append(under, children[under[i]]...)
	}
	for _, pid := range second.pids {
		s := st[pid]
		if f, ok := first.stats[pid]; ok && f.startTick == s.startTick && f.state == s.state &&
			(s.state == "D" || s.state == "T" || s.state == "t") {
			if isUnder[pid] {
				add(pid, RoleChild)
			} else {
				add(pid, RoleOther)
			}
		}
	}
	for _, pid := range under {
		if isUnder[pid] {
			add(pid, RoleChild)
		}
	}
	return roles, order
}

// kubelets finds the kubelet: where several run (nodes of a test
// cluster on one machine), those whose command line names the runtime's
// socket, or every one when none does (a kubelet configured by file).
func (p Proc) kubelets(o scanOptions, l look) []int {
	var all, named []int
	for _, pid := range l.pids {
		if l.stats[pid].comm != "kubelet" {
			continue
		}
		all = append(all, pid)
		if o.socket != "" && strings.Contains(o.cmdlines.get(p, pid, l.stats[pid].startTick, o.perProcess), o.socket) {
			named = append(named, pid)
		}
	}
	if len(all) > 1 && len(named) > 0 {
		return named
	}
	return all
}

// describe reads what a process's role needs from its command line and,
// for a CNI plugin, CNI_COMMAND alone of its environment; false drops a
// candidate that turned out to be neither a CNI plugin nor an OCI
// runtime. It runs under the process's deadline, as the memory map lock
// these reads take may be held by a process stuck in the kernel.
func (p Proc) describe(pr *Process, o scanOptions, start uint64) bool {
	switch pr.Role {
	case RoleShim:
		pr.ID, pr.Name = shimIdentity(pr.Comm, argv(o.cmdlines.get(p, pr.Pid, start, o.perProcess)))
	case RoleOCI:
		args, _, _ := within(o.perProcess, func() ([]string, error) { return argv(p.cmdline(pr.Pid)), nil })
		describeOCI(pr, args)
	case RoleCNI:
		if isOCI(pr.Comm) {
			pr.Role = RoleOCI
			return p.describe(pr, o, start)
		}
		type cni struct {
			args []string
			cmd  string
		}
		c, _, timedOut := within(o.perProcess, func() (cni, error) {
			return cni{argv(p.cmdline(pr.Pid)), p.environVar(pr.Pid, "CNI_COMMAND")}, nil
		})
		if timedOut {
			return true // kept as a candidate: what it is could not be read
		}
		plugin := cniPlugin(c.args)
		if plugin == "" && c.cmd == "" {
			return false
		}
		pr.CNICommand = c.cmd
		if len(c.args) > 0 {
			pr.Args0 = termSafe(c.args[0])
		}
		pr.Name = plugin
		if pr.Name == "" {
			pr.Name = pr.Comm
		}
	}
	return true
}

// cniPlugin is the path of the CNI plugin a command line runs, when one
// of its first two arguments (a binary's, or a script's after its
// interpreter) is in a CNI directory: its base name.
func cniPlugin(args []string) string {
	for _, a := range args[:min(len(args), 2)] {
		for _, d := range cniDirs {
			if strings.HasPrefix(a, d) {
				return termSafe(filepath.Base(a))
			}
		}
	}
	return ""
}

// ociSubcommands are the commands of runc and its kin.
var ociSubcommands = []string{"create", "start", "run", "exec", "kill", "delete", "state", "update", "pause",
	"resume", "ps", "events", "checkpoint", "restore", "features", "init", "list", "spec", "boot", "gofer",
	"sandbox", "wait"}

// describeOCI sets an OCI runtime's program, its command and the
// container it is about (the command's last argument).
func describeOCI(pr *Process, args []string) {
	if strings.HasPrefix(pr.Comm, "runc:[") {
		pr.Subcommand = "init"
	}
	if len(args) == 0 {
		return
	}
	pr.Args0 = termSafe(args[0])
	for i, a := range args[1:] {
		if slices.Contains(ociSubcommands, a) {
			pr.Subcommand = a
			rest := args[i+2:]
			if pr.Subcommand == "exec" && !slices.Contains(rest, "--detach") && !slices.Contains(rest, "-d") {
				pr.Subcommand = "exec (attached)"
			}
			for j := len(rest) - 1; j >= 0; j-- {
				if !strings.HasPrefix(rest[j], "-") && len(rest[j]) >= 12 {
					pr.ID = termSafe(rest[j][:min(len(rest[j]), 64)])
					break
				}
			}
			return
		}
	}
}

// shimIdentity is what a shim is about: containerd's shim's -id (its
// pod's sandbox, or a container's with one shim per container) and
// conmon's -c (its container) with its -n (the container's name as the
// kubelet made it: k8s_CONTAINER_POD_NAMESPACE_UID_ATTEMPT).
func shimIdentity(comm string, args []string) (id, name string) {
	for i := 0; i+1 < len(args); i++ {
		switch a, v := args[i], termSafe(args[i+1]); {
		case a == "-id" || a == "--id":
			id = v
		case comm == "conmon" && (a == "-c" || a == "--cid"):
			id = v
		case comm == "conmon" && (a == "-n" || a == "--name"):
			name = v
		}
	}
	return id, name
}

// findRuntime finds the runtime's process: the one found before if it
// still runs a runtime, else the owner of the socket, else the one by
// name whose command line names the socket (containerd --address, crio
// --listen), else the first by name; 0 if none. It tells out how. The
// socket's owner is found only where its socket shows in this network
// namespace and its descriptors can be read: in a pod, whose network
// is its own and whose capabilities are dropped, neither holds, and a
// node that runs several runtimes (a test's, a kind cluster's) would
// otherwise get the first by name.
func (p Proc) findRuntime(o scanOptions, pids []int, stats map[int]stat, out *Processes) int {
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
	if o.socket != "" {
		for _, pid := range pids {
			if slices.Contains(runtimeNames, stats[pid].comm) &&
				strings.Contains(o.cmdlines.get(p, pid, stats[pid].startTick, o.perProcess), o.socket) {
				out.FoundBy = "command line"
				return pid
			}
		}
	}
	// By name, cri-dockerd first: docker's own containerd runs beside
	// it, and cri-dockerd is the CRI runtime then.
	for _, name := range slices.Backward(runtimeNames) {
		for _, pid := range pids {
			if stats[pid].comm == name {
				out.FoundBy = "name"
				return pid
			}
		}
	}
	return 0
}

// findShims finds the runtime's shims: those whose command line names
// the socket, or every shim when none does (conmon's do not).
func (p Proc) findShims(o scanOptions, pids []int, stats map[int]stat) []int {
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

// pidOf is the process of a role in a scan, 0 if none.
func (ps *Processes) pidOf(role string) int {
	if ps == nil {
		return 0
	}
	for _, p := range ps.List {
		if p.Role == role {
			return p.Pid
		}
	}
	return 0
}
