// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"strings"

	"github.com/plegkit/pleg/flightrec"
)

// processes are the view's processes, none when it has no process part.
func (v *nodeView) processes() []flightrec.Process {
	if v.rec.Processes == nil {
		return nil
	}
	return v.rec.Processes.List
}

// frozen tells a process held by the cgroup freezer (a paused pod, a
// paused container of docker's): in D in the refrigerator.
func frozen(p flightrec.Process) bool { return p.State == "D" && waitKind(p.WChan) == "freezer" }

// stopped finds the runtime, docker's daemons, a shim or the kubelet
// stopped (T, or t under a debugger) or frozen: they answer nothing, and
// nothing but a person or a tool puts them there.
func (v *nodeView) stopped() []Finding {
	// A stopped shim whose pod the runtime under diagnosis names comes
	// before one it does not name: that one may be another runtime's on
	// the same host, or a pod already gone.
	var out, unnamed []Finding
	for _, p := range v.processes() {
		isStopped := p.State == "T" || p.State == "t"
		if !isStopped && !frozen(p) {
			continue
		}
		id := map[string]string{flightrec.RoleRuntime: "runtime-stopped", flightrec.RoleEngine: "runtime-stopped",
			flightrec.RoleShim: "shim-stopped", flightrec.RoleKubelet: "kubelet-stopped"}[p.Role]
		if id == "" {
			continue
		}
		how := fmt.Sprintf("is stopped (%s): resume it with kill -CONT %d", p.State, p.Pid)
		action := fmt.Sprintf("A stopped process answers nothing. Find what stopped it (a SIGSTOP from a person or a "+
			"tool, a debugger: grep TracerPid /proc/%d/status) and resume it: kill -CONT %d.", p.Pid, p.Pid)
		if !isStopped {
			how = "is frozen by its cgroup's freezer: thaw it"
			action = fmt.Sprintf("A frozen process answers nothing. Find its freezer cgroup (grep freezer /proc/%d/cgroup) "+
				"and thaw it (echo THAWED > /sys/fs/cgroup/freezer/PATH/freezer.state, or cgroup.freeze 0 on v2); "+
				"a paused container is resumed with %s.", p.Pid, v.rt.resume)
		}
		ev := []string{describeProcess(p)}
		if s, ok := stackLine(p); ok {
			ev = append(ev, s)
		}
		switch p.Role {
		case flightrec.RoleRuntime, flightrec.RoleEngine:
			ev = append(ev, "every CRI call waits for it: the kubelet's runtime check fails after about 2 minutes and its "+
				"PLEG after 3")
			action += " Take its goroutine stacks first if it hangs again once resumed: " + v.rt.stacks(p.Pid) + "."
		case flightrec.RoleShim:
			ev = append(ev, "the runtime answers the lists from its own store, so the kubelet's PLEG stays healthy until it "+
				"acts on this pod: a stop, an exec, a resize or a status of its containers then hangs")
		case flightrec.RoleKubelet:
			ev = append(ev, "the kubelet's sync loop and its PLEG are stopped with it: the node goes NotReady when its "+
				"lease expires")
		}
		f := Finding{ID: id, Severity: Critical, cause: true, Evidence: ev, Action: action, Title: v.who(p) + " " + how}
		if p.Role == flightrec.RoleShim && !strings.HasPrefix(v.ofPod(p), " of pod ") {
			unnamed = append(unnamed, f)
			continue
		}
		out = append(out, f)
	}
	return append(out, unnamed...)
}

// notRunning finds no runtime process at all on a node whose runtime
// does not answer: seen only with the host's processes in view.
func (v *nodeView) notRunning() []Finding {
	ps := v.rec.Processes
	if ps == nil || !ps.HostView || !v.answers.known || v.answers.reachable {
		return nil
	}
	for _, p := range ps.List {
		if p.Role == flightrec.RoleRuntime {
			return nil
		}
	}
	endpoint := ""
	if v.rec.Runtime != nil {
		endpoint = v.rec.Runtime.Endpoint
	}
	return []Finding{{ID: "runtime-not-running", Severity: Critical, cause: true,
		Title: fmt.Sprintf("No %s process runs on this node", v.rt.name),
		Evidence: []string{"no process owns " + cmpOr(endpoint, "the runtime's socket") + " nor bears a runtime's name " +
			"(containerd, crio, cri-dockerd), and the host's processes are in view"},
		Action: fmt.Sprintf("Start it and read why it stopped: %s; %s --since -1h; then compare the endpoint with the "+
			"kubelet's --container-runtime-endpoint.", v.rt.systemctl(), v.rt.journal)}}
}

// commands finds OCI runtimes' commands and CNI plugins that do not end:
// each lives a fraction of a second when all is well.
func (v *nodeView) commands() []Finding {
	var out []Finding
	for _, p := range v.processes() {
		if p.Role != flightrec.RoleOCI && p.Role != flightrec.RoleCNI {
			continue
		}
		age := secondsDuration(p.AgeSeconds)
		held := p.Held && (p.State == "D" || p.State == "T")
		if age < commandStuck && !held {
			continue
		}
		sev := Warning
		if age >= commandHung || held {
			sev = Critical
		}
		if p.Role == flightrec.RoleCNI {
			out = append(out, v.cniFinding(p, sev))
			continue
		}
		if strings.HasPrefix(p.Subcommand, "exec (attached)") {
			continue // a runc exec without --detach lasts as long as the exec session it serves
		}
		what := cmpOr(p.Subcommand, "a command")
		title := fmt.Sprintf("%s has run %s for %s", v.who(p), what, fmtSeconds(p.AgeSeconds))
		if p.ID != "" {
			title += " on container " + shortID(p.ID) + v.podOfID(p.ID)
		}
		ev := []string{describeProcess(p), "an OCI runtime's command ends in a fraction of a second; the shim and the " +
			"runtime wait for it, and the kubelet's calls on the container with them"}
		if s, ok := stackLine(p); ok {
			ev = append(ev, s)
		}
		out = append(out, Finding{ID: "oci-stuck", Severity: sev, cause: true, Title: title, Evidence: ev,
			Action: fmt.Sprintf("See where it waits: cat /proc/%d/stack and /proc/%d/wchan (a mount that does not answer, "+
				"the disk, a frozen cgroup); its container's state: %s. Killing it (kill -9 %d) frees the shim; what it "+
				"waits on will stop the next one too.", p.Pid, p.Pid, v.rt.tasks, p.Pid)})
	}
	return out
}

// cniFinding is a CNI plugin that does not end.
func (v *nodeView) cniFinding(p flightrec.Process, sev Severity) Finding {
	what := cmpOr(p.CNICommand, "its command")
	ev := []string{describeProcess(p)}
	if p.Args0 != "" {
		ev = append(ev, "run as "+p.Args0+", with CNI_COMMAND="+cmpOr(p.CNICommand, "(not readable)"))
	}
	switch p.CNICommand {
	case "ADD":
		ev = append(ev, "a sandbox waits for its network: RunPodSandbox hangs, the kubelet gives up after its "+
			"--runtime-request-timeout (2m) and tries again, and the pod never starts")
	case "DEL":
		ev = append(ev, "a sandbox waits for its network's teardown: StopPodSandbox hangs, and the pod stays "+
			"Terminating")
	}
	return Finding{ID: "cni-plugin-hung", Severity: sev, cause: true, Evidence: ev,
		Title: fmt.Sprintf("%s has run %s for %s", v.who(p), what, fmtSeconds(p.AgeSeconds)),
		Action: fmt.Sprintf("See where it waits: cat /proc/%d/stack, its own children (ps --ppid %d), what it calls "+
			"(its IPAM, its daemon's socket, the API server for calico and cilium); its configuration in /etc/cni/net.d "+
			"and its logs. The pods waiting on it: crictl pods --state notready. Killing it (kill %d) fails the "+
			"runtime's call, which the kubelet retries.", p.Pid, p.Pid, p.Pid)}
}

// podOfID is " of pod ns/name" for a sandbox's or container's ID, when
// known.
func (v *nodeView) podOfID(id string) string {
	if pod, ok := v.names.of(id); ok {
		return " of pod " + pod.String()
	}
	return ""
}

// shims finds shims left without a process under them: their pod's
// containers gone, they should have exited; one that does not is stuck
// in its cleanup (an unmount, a delete).
func (v *nodeView) shims() []Finding {
	if v.rec.Processes == nil || v.rec.Processes.WindowSeconds == 0 {
		return nil // a look without the children's count
	}
	var out []Finding
	for _, p := range v.processes() {
		if p.Role != flightrec.RoleShim || p.Children > 0 || p.State == "T" ||
			secondsDuration(p.AgeSeconds) < shimIdle {
			continue
		}
		out = append(out, Finding{ID: "shim-lingering", Severity: Warning,
			Title:    fmt.Sprintf("%s has no process under it and has not exited", v.who(p)),
			Evidence: []string{describeProcess(p), "a shim exits once its containers are deleted"},
			Action: fmt.Sprintf("See where it waits (cat /proc/%d/stack: an unmount, a delete on a slow disk) and "+
				"what the runtime says of its pod (%s, %s).", p.Pid, v.rt.tasks, v.rt.journal)})
	}
	return out
}

// inD finds the runtime's processes stuck in D whose wait no cause above
// explains (a mount, the disk, a freezer), and the node's other
// processes held in D.
func (v *nodeView) inD() []Finding {
	var out []Finding
	var others []string
	for _, p := range v.processes() {
		kind := processWait(p)
		explained := kind == "disk" || kind == "freezer" || (kind == "netfs" && len(v.hungMounts()) > 0)
		switch {
		case p.Role == flightrec.RoleOther || p.Role == flightrec.RoleChild:
			if p.State == "D" && (p.Held || v.rec.Processes.WindowSeconds == 0) && kind != "disk" {
				others = append(others, fmt.Sprintf("%s in %s", v.who(p), cmpOr(p.WChan, "?")))
			}
		case p.State == "D" && !explained:
			out = append(out, v.dFinding(p, kind))
		case p.State != "D" && p.ThreadsD >= threadsInD && !explained:
			out = append(out, Finding{ID: "process-in-d", Severity: Warning, Evidence: []string{describeProcess(p),
				"threads in D: " + cmpOr(threadWaits(p), "their wait channels not readable")},
				Title: fmt.Sprintf("%d threads of %s are in uninterruptible sleep (D)", p.ThreadsD, v.who(p)),
				Action: "Threads in D wait in the kernel, most often on storage: read their kernel stacks " +
					fmt.Sprintf("(cat /proc/%d/task/*/stack) while it lasts, and the kernel log (dmesg -T).", p.Pid)})
		}
	}
	if len(others) > 0 {
		ev := others[:min(len(others), 8)]
		if len(others) > 8 {
			ev = append(ev, fmt.Sprintf("and %d more", len(others)-8))
		}
		out = append(out, Finding{ID: "processes-in-d", Severity: Warning, Evidence: ev,
			Title: fmt.Sprintf("%s stuck in uninterruptible sleep (D)", plural(len(others), "process is",
				"processes are")),
			Action: "A process in D waits in the kernel and no signal ends it: the wait channel says on what (nfs_*, " +
				"rpc_*, fuse_*: a network file system; io_schedule, jbd2_*: the disk). ps -eo pid,stat,wchan:32,args " +
				"| awk '$2 ~ /D/' lists them."})
	}
	return out
}

// dFinding is one of the runtime's processes in D.
func (v *nodeView) dFinding(p flightrec.Process, kind string) Finding {
	title := fmt.Sprintf("%s is in uninterruptible sleep (D)", v.who(p))
	if p.WChan != "" {
		title += " in " + p.WChan
	}
	ev := []string{describeProcess(p)}
	if s, ok := stackLine(p); ok {
		ev = append(ev, s)
	}
	if kind == "netfs" {
		ev = append(ev, "it waits on a network file system (NFS, FUSE, CephFS), which may answer yet")
	}
	sev := Critical
	if p.Role == flightrec.RoleOCI || p.Role == flightrec.RoleCNI || (!p.Held && v.rec.Processes.WindowSeconds > 0) {
		sev = Warning
	}
	return Finding{ID: "process-in-d", Severity: sev, Title: title, Evidence: ev,
		Action: "A process in D waits in the kernel, most often on storage or a network file system, and no signal " +
			fmt.Sprintf("ends it: read its kernel stack (cat /proc/%d/stack), the mounts it uses, and the kernel log "+
				"(dmesg -T | grep -i 'blocked for more than').", p.Pid)}
}

// zombies finds the runtime's processes that exited unreaped.
func (v *nodeView) zombies() []Finding {
	var out []Finding
	for _, p := range v.processes() {
		if p.State != "Z" || p.Role == flightrec.RoleChild || p.Role == flightrec.RoleOther {
			continue
		}
		out = append(out, Finding{ID: "process-zombie", Severity: Warning, Evidence: []string{describeProcess(p)},
			Title:  fmt.Sprintf("%s is a zombie: it exited and its parent has not reaped it", v.who(p)),
			Action: fmt.Sprintf("Its parent (pid %d) is stuck or lost track of it.", p.PPid)})
	}
	return out
}
