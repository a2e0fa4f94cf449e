// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/kubeletpleg"
	"github.com/plegkit/pleg/runtime"
)

// flavour is a runtime as a node's view shows it: its name as CRI
// Version gives it, its process, its shims, and a word its actions must
// hold.
type flavour struct {
	name, version, comm, shim, endpoint string
	// stacks is in the action of a stopped runtime: how to have its
	// stacks.
	stacks string
}

var flavours = []flavour{
	{"containerd", "containerd", "containerd", "containerd-shim", "unix:///run/containerd/containerd.sock",
		"kill -USR1 100 writes containerd's goroutines"},
	{"CRI-O", "cri-o", "crio", "conmon", "unix:///var/run/crio/crio.sock", "crio status goroutines"},
}

// proc is a process of a view.
func proc(pid, ppid int, role, comm, state, wchan string) flightrec.Process {
	return flightrec.Process{Pid: pid, PPid: ppid, Role: role, Comm: comm, State: state, WChan: wchan, Held: true,
		AgeSeconds: 600}
}

// view is a node's view on a runtime: its process, one shim with a
// container, the kubelet, the host quiet; pleg's lists answer in 2 ms.
func view(f flavour) *flightrec.Recording {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	shim := proc(200, 1, "shim", f.shim, "S", "ep_poll")
	shim.ID, shim.Children = "sb-web", 1
	return &flightrec.Recording{Name: "live", Onset: t0, Started: t0,
		Runtime: &flightrec.RuntimeState{Name: f.version, Endpoint: f.endpoint, Pid: 100},
		Processes: &flightrec.Processes{HostView: true, WindowSeconds: 1, List: []flightrec.Process{
			proc(100, 1, "runtime", f.comm, "S", "futex_wait_queue"),
			proc(150, 1, "kubelet", "kubelet", "S", "futex_wait_queue"),
			shim,
			proc(201, 200, "child", "nginx", "S", "ep_poll"),
		}},
		Host: &flightrec.Host{Pressure: map[string]flightrec.Pressure{"cpu": {SomeAvg10: 3}, "memory": {}, "io": {}},
			Memory: map[string]int64{"MemTotal": 8 << 30, "MemAvailable": 4 << 30}, MountsChecked: 30,
			PIDs: &flightrec.PIDs{Max: 32768, ThreadsMax: 192730, InUse: 900}},
		Pleg: &flightrec.PlegView{Recent: []flightrec.Call{{Op: runtime.OpListPodSandbox, Seconds: 0.002},
			{Op: runtime.OpListContainers, Seconds: 0.002}}},
	}
}

// change applies a change to the view's process of pid.
func change(rec *flightrec.Recording, pid int, f func(p *flightrec.Process)) {
	for i := range rec.Processes.List {
		if rec.Processes.List[i].Pid == pid {
			f(&rec.Processes.List[i])
		}
	}
}

// inFlight makes pleg's lists hang for s seconds.
func inFlight(rec *flightrec.Recording, s float64) {
	rec.Pleg.InFlight = []flightrec.Call{{Op: runtime.OpListPodSandbox, Seconds: s}}
	rec.Pleg.Recent = nil
	rec.Parts = append(rec.Parts, flightrec.Part{Name: flightrec.PartVersion, TimedOut: true},
		flightrec.Part{Name: flightrec.PartRuntimeStacks, TimedOut: true})
}

// Each cause that can show on a node is named by the first finding, on
// containerd and on CRI-O, ahead of its symptoms, with an action in the
// runtime's own tools. The IDs are the incident suite's contract.
func TestTheCauseIsTheFirstFinding(t *testing.T) {
	for _, tc := range []struct {
		cause string
		fault func(rec *flightrec.Recording)
		id    string
		title string // in the first finding's title
		sev   Severity
	}{
		{"the runtime stopped", func(rec *flightrec.Recording) {
			change(rec, 100, func(p *flightrec.Process) { p.State, p.WChan = "T", "do_signal_stop" })
			inFlight(rec, 61)
		}, "runtime-stopped", "(pid 100) is stopped (T): resume it with kill -CONT 100", Critical},
		{"a shim stopped", func(rec *flightrec.Recording) {
			change(rec, 200, func(p *flightrec.Process) { p.State, p.WChan = "T", "do_signal_stop" })
		}, "shim-stopped", "The shim", Critical},
		{"a hung mount, runc in D on it, the lists hung", func(rec *flightrec.Recording) {
			rec.Host.HungMounts = []string{"/mnt/fuse"}
			rec.Processes.List = append(rec.Processes.List, flightrec.Process{Pid: 202, PPid: 200, Role: "oci", Comm: "runc",
				Args0: "runc", Subcommand: "create", State: "D", WChan: "request_wait_answer", Held: true, AgeSeconds: 95})
			inFlight(rec, 70)
		}, "mount-hung", "Mount /mnt/fuse does not answer: 1 processes wait on it in D, runc (pid 202)", Critical},
		{"the disk saturated", func(rec *flightrec.Recording) {
			change(rec, 100, func(p *flightrec.Process) {
				p.ThreadsD, p.ThreadWaits = 3, map[string]int{"jbd2_log_wait_commit": 2, "io_schedule": 1}
				p.Cgroup = &flightrec.Cgroup{IOPath: "/blkio/x", IOLimits: []string{"write_bps_device 8:0 16"}}
			})
			rec.Host.Pressure["io"] = flightrec.Pressure{SomeAvg10: 45}
			rec.Host.Pressure["cpu"] = flightrec.Pressure{SomeAvg10: 85}
			inFlight(rec, 70)
		}, "disk-saturated", "is waiting on the disk: 3 threads in D (1 in io_schedule, 2 in jbd2_log_wait_commit)", Critical},
		{"the runtime's writes throttled, none waiting yet, the lists hung", func(rec *flightrec.Recording) {
			change(rec, 100, func(p *flightrec.Process) {
				p.Cgroup = &flightrec.Cgroup{IOPath: "/blkio/x", IOLimits: []string{"write_bps_device 8:0 16"}}
			})
			rec.Host.Pressure["cpu"] = flightrec.Pressure{SomeAvg10: 85}
			inFlight(rec, 70)
		}, "disk-saturated", "I/O is throttled: write_bps_device 8:0 16", Warning},
		{"the runtime starved of CPU by its cgroup", func(rec *flightrec.Recording) {
			change(rec, 100, func(p *flightrec.Process) {
				p.Sched = &flightrec.Sched{WindowSeconds: 1, RanSeconds: 0.001, WaitedSeconds: 1.9, Threads: 20}
				p.Cgroup = &flightrec.Cgroup{CPUPath: "/cpu/x", CPUQuotaSeconds: 0.001, CPUPeriodSeconds: 1,
					WindowPeriods: 1, WindowThrottled: 1}
			})
			rec.Host.Pressure["cpu"] = flightrec.Pressure{SomeAvg10: 90}
			inFlight(rec, 90)
		}, "runtime-cpu-starved", "(pid 100) is starved of CPU: it waited 100% of the time it wanted to run", Critical},
		{"memory starved, a shim killed", func(rec *flightrec.Recording) {
			rec.Host.Pressure["memory"] = flightrec.Pressure{SomeAvg10: 70}
			rec.Host.Pressure["cpu"] = flightrec.Pressure{SomeAvg10: 70}
			rec.Host.Memory["MemAvailable"] = 100 << 20
			rec.Host.KernelLog = []string{"[100.0] Out of memory: Killed process 200 (containerd-shim) total-vm:1kB"}
		}, "memory-starved", "The node is starved of memory: the kernel killed containerd-shim", Critical},
		{"PIDs exhausted", func(rec *flightrec.Recording) {
			rec.Host.PIDs.InUse = 32700
			rec.Host.PIDs.Cgroups = []flightrec.PidsCgroup{{Of: "kubepods", Path: "/pids/kubepods", Current: 31800},
				{Of: "pod", PodUID: "6f1d", Path: "/pids/kubepods/besteffort/pod6f1d", Current: 31000}}
			inFlight(rec, 30)
		}, "pids-exhausted", "The node has used 32,700 of 32,768 PIDs: fork fails in the runtime and runc", Critical},
		{"a CNI plugin hung on ADD", func(rec *flightrec.Recording) {
			rec.Processes.List = append(rec.Processes.List, flightrec.Process{Pid: 300, PPid: 100, Role: "cni",
				Comm: "bridge", Name: "bridge", Args0: "/bin/sh", CNICommand: "ADD", State: "S", WChan: "do_wait",
				AgeSeconds: 95})
		}, "cni-plugin-hung", "The CNI plugin bridge (pid 300) has run ADD for 95 s", Warning},
		{"a runc that does not end", func(rec *flightrec.Recording) {
			rec.Processes.List = append(rec.Processes.List, flightrec.Process{Pid: 202, PPid: 200, Role: "oci", Comm: "runc",
				Args0: "runc", Subcommand: "kill", ID: "sb-web", State: "S", WChan: "futex_wait_queue", AgeSeconds: 45})
		}, "oci-stuck", "runc (pid 202) has run kill for 45 s on container sb-web", Warning},
		{"the kubelet starved, the runtime quick", func(rec *flightrec.Recording) {
			rec.Kubelet = &kubeletpleg.Reading{Source: "https://127.0.0.1:10250/metrics", LastSeen: rec.Onset.Add(-95 * time.Second),
				LastSeenAgeSeconds: 95, Relists: kubeletpleg.Histogram{Count: 100, P50Seconds: 0.004, P99Seconds: 0.02}}
			change(rec, 150, func(p *flightrec.Process) {
				p.Sched = &flightrec.Sched{WindowSeconds: 1, RanSeconds: 0.05, WaitedSeconds: 0.8, Threads: 30}
			})
			rec.Host.Pressure["cpu"] = flightrec.Pressure{SomeAvg10: 75}
		}, "kubelet-starved", "The kubelet's PLEG is behind because the kubelet itself is starved: its threads waited 800 ms for a CPU over 1.0 s, 94%", Critical},
		{"the kubelet behind, the runtime quick, nothing starved", func(rec *flightrec.Recording) {
			rec.Kubelet = &kubeletpleg.Reading{Source: "https://127.0.0.1:10250/metrics", LastSeen: rec.Onset.Add(-40 * time.Second),
				LastSeenAgeSeconds: 40}
		}, "kubelet-pleg-behind", "the kubelet itself is stuck or starved, not the runtime", Warning},
		{"the kubelet's metrics unanswered, the kubelet starved", func(rec *flightrec.Recording) {
			rec.Kubelet = &kubeletpleg.Reading{Source: "https://127.0.0.1:10250/metrics", Error: "no answer within 5s: context deadline exceeded"}
			change(rec, 150, func(p *flightrec.Process) {
				p.Cgroup = &flightrec.Cgroup{CPUPath: "/cpu/kubelet", CPUQuotaSeconds: 0.01, CPUPeriodSeconds: 0.1,
					WindowPeriods: 10, WindowThrottled: 9}
			})
		}, "kubelet-starved", "its cgroup /cpu/kubelet allows 10 ms of CPU every 100 ms", Critical},
		{"the kubelet stopped", func(rec *flightrec.Recording) {
			change(rec, 150, func(p *flightrec.Process) { p.State = "T" })
		}, "kubelet-stopped", "The kubelet (pid 150) is stopped (T): resume it with kill -CONT 150", Critical},
		{"the runtime frozen", func(rec *flightrec.Recording) {
			change(rec, 100, func(p *flightrec.Process) { p.State, p.WChan = "D", "__refrigerator" })
		}, "runtime-stopped", "is frozen by its cgroup's freezer", Critical},
		{"the runtime not running", func(rec *flightrec.Recording) {
			rec.Processes.List = rec.Processes.List[1:]
			inFlight(rec, 20)
		}, "runtime-not-running", "process runs on this node", Critical},
		{"CPU saturated, nothing more specific", func(rec *flightrec.Recording) {
			rec.Host.Pressure["cpu"] = flightrec.Pressure{SomeAvg10: 85}
		}, "cpu-starved", "The node's CPUs are saturated: cpu pressure 85%", Critical},
		{"a quiet node", func(*flightrec.Recording) {}, "", "", ""},
	} {
		for _, f := range flavours {
			t.Run(tc.cause+"/"+f.name, func(t *testing.T) {
				rec := view(f)
				tc.fault(rec)
				got := RecordingFindings(rec)
				if tc.id == "" {
					if len(got) != 0 {
						t.Errorf("findings %+v, want none", got)
					}
					return
				}
				if len(got) == 0 {
					t.Fatal("no finding")
				}
				first := got[0]
				if first.ID != tc.id || !strings.Contains(first.Title, tc.title) || first.Severity != tc.sev {
					var all []string
					for _, f := range got {
						all = append(all, f.ID+" ["+string(f.Severity)+"] "+f.Title)
					}
					t.Errorf("first finding %s [%s] %q, want %s [%s] with %q; all:\n%s", first.ID, first.Severity,
						first.Title, tc.id, tc.sev, tc.title, strings.Join(all, "\n"))
				}
				for _, other := range got {
					if f.name == "CRI-O" && (strings.Contains(other.Action, "journalctl -u containerd") ||
						strings.Contains(other.Action, "ctr ")) {
						t.Errorf("%s on CRI-O names containerd's tools: %s", other.ID, other.Action)
					}
					if f.name == "containerd" && strings.Contains(other.Action, "crio") {
						t.Errorf("%s on containerd names CRI-O's tools: %s", other.ID, other.Action)
					}
				}
				if tc.id == "runtime-stopped" && strings.Contains(first.Title, "(T)") && !strings.Contains(first.Action, f.stacks) {
					t.Errorf("the stopped runtime's action %q does not tell how to have its stacks (%q)", first.Action, f.stacks)
				}
			})
		}
	}
}

// In doctor's live view the same findings come from the node's snapshot,
// with the pods named from the runtime's lists, ranked with the CRI's:
// the cause before "the runtime does not answer".
func TestLiveViewNamesTheCauseBeforeTheSymptom(t *testing.T) {
	r := fakeReport(fastPods(3)...)
	r.Runtime = RuntimeInfo{Error: "Version: no answer within 10s"}
	r.Node = view(flavours[0])
	change(r.Node, 100, func(p *flightrec.Process) { p.State = "T" })
	r.names = podNames{"sb-web": {UID: "u1", Name: "web-0", Namespace: "shop"}}
	assess(r)
	if r.Findings[0].ID != "runtime-stopped" || r.Verdict != Unhealthy {
		t.Fatalf("first %+v, verdict %s", r.Findings[0], r.Verdict)
	}
	if r.Findings[1].ID != "runtime-unreachable" || !strings.Contains(r.Findings[1].Action, "journalctl -u containerd") {
		t.Errorf("second %+v: want runtime-unreachable, in containerd's words", r.Findings[1])
	}

	r = fakeReport(fastPods(3)...)
	r.Node = view(flavours[1])
	change(r.Node, 200, func(p *flightrec.Process) { p.State = "T" })
	r.names = podNames{"sb-web": {UID: "u1", Name: "web-0", Namespace: "shop"}}
	assess(r)
	if f := r.Findings[0]; f.ID != "shim-stopped" || !strings.Contains(f.Title, "The shim conmon (pid 200) of pod shop/web-0 is stopped") {
		t.Errorf("first %+v: want the shim named with its pod", f)
	}
}

// On a host with more than one runtime (or a pod already gone), a stopped
// shim this runtime does not name is listed after the one whose pod it
// names, whatever the order the scan found them in.
func TestStoppedShimOfThisRuntimeFirst(t *testing.T) {
	r := fakeReport(fastPods(3)...)
	r.Node = view(flavours[1])
	other := proc(190, 1, "shim", "containerd-shim", "T", "do_signal_stop")
	other.ID = "sb-elsewhere"
	r.Node.Processes.List = append([]flightrec.Process{other}, r.Node.Processes.List...)
	change(r.Node, 200, func(p *flightrec.Process) { p.State = "T" })
	r.names = podNames{"sb-web": {UID: "u1", Name: "web-0", Namespace: "shop"}}
	assess(r)
	if f := r.Findings[0]; f.ID != "shim-stopped" || !strings.Contains(f.Title, "of pod shop/web-0") {
		t.Errorf("first %+v: want the shim of this runtime's pod", f)
	}
	if f := r.Findings[1]; f.ID != "shim-stopped" || !strings.Contains(f.Title, "(pid 190)") {
		t.Errorf("second %+v: want the other shim after it", f)
	}
}

// Thousands of exited containers are the cause of the slow relists
// beside them, ranked first even where the node's CPUs are saturated (as
// relisting them saturates them).
func TestDeadContainersOutrankTheirSlowRelists(t *testing.T) {
	r := fakeReport(fastPods(3)...)
	r.Workload.ContainersExited = 5000
	r.Projection.SteadySeconds = 200
	r.Node = view(flavours[0])
	r.Node.Host.Pressure["cpu"] = flightrec.Pressure{SomeAvg10: 90}
	assess(r)
	if r.Findings[0].ID != "dead-containers" {
		var ids []string
		for _, f := range r.Findings {
			ids = append(ids, f.ID)
		}
		t.Errorf("findings %v: want dead-containers first", ids)
	}
}
