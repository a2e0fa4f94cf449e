// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// btime is the fake /proc's boot time, and at a moment 1,000 s after it.
var (
	btime = time.Unix(1764158400, 0)
	at    = btime.Add(1000 * time.Second)
)

// startedAgo is the start tick of a process at has seen live for age.
func startedAgo(age time.Duration) uint64 {
	return uint64((1000*time.Second - age) / (time.Second / 100))
}

// fakeCgroups builds cgroup file systems in a directory.
type fakeCgroups struct {
	t    *testing.T
	root string
}

func (c fakeCgroups) write(name, content string) {
	c.t.Helper()
	path := filepath.Join(c.root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// node is a containerd node with a kubelet, a stuck runc, a CNI plugin
// hung on ADD, a process in D and one stopped, on cgroup v1.
func node(t *testing.T) (*fakeProc, fakeCgroups) {
	p := newFakeProc(t)
	cg := fakeCgroups{t, t.TempDir()}
	p.process(1, 0, "systemd", "S", "/sbin/init", "ep_poll", 0)
	p.process(2, 0, "kthreadd", "S", "", "kthreadd", 0)
	p.processAt(100, 1, "containerd", "S", "/usr/bin/containerd", "futex_wait_queue", 777, startedAgo(900*time.Second))
	p.write("100/task/100/schedstat", "1000000000 500000000 10\n")
	p.write("100/task/101/schedstat", "1000000000 500000000 10\n")
	p.write("100/cgroup", "8:pids:/system.slice/containerd.service\n7:blkio:/pleg-incident-100\n"+
		"2:cpuacct:/\n1:cpu:/pleg-incident-100\n0::/\n")
	p.processAt(150, 1, "kubelet", "S", "/usr/bin/kubelet\x00--v=2", "futex_wait_queue", 0, startedAgo(800*time.Second))
	p.write("150/task/150/schedstat", "5000000000 100000000 10\n")
	p.write("150/cgroup", "1:cpu:/system.slice/kubelet.service\n")
	p.process(200, 1, "containerd-shim", "S", shimCmdline, "ep_poll", 0)
	p.process(201, 200, "pause", "S", "/pause", "sys_pause", 0)
	p.processAt(202, 200, "runc", "S", "runc\x00--root\x00/run/containerd/runc/k8s.io\x00kill\x00"+
		"4e1d0f5a2b3c4d5e6f708192a3b4c5d6\x009", "futex_wait_queue", 0, startedAgo(95*time.Second))
	p.processAt(300, 100, "bridge", "S", "/bin/sh\x00/opt/cni/bin/bridge", "do_wait", 0, startedAgo(95*time.Second))
	p.write("300/environ", "PATH=/usr/bin\x00CNI_COMMAND=ADD\x00CNI_ARGS=K8S_POD_NAME=secret\x00TOKEN=hunter2\x00")
	p.processAt(301, 100, "iptables", "S", "/usr/sbin/iptables\x00-L", "", 0, startedAgo(time.Second))
	p.write("301/environ", "PATH=/usr/bin\x00")
	p.process(400, 1, "cat", "D", "cat\x00/mnt/nfs/x", "rpc_wait_bit_killable", 0)
	p.process(401, 1, "vim", "T", "vim", "do_signal_stop", 0)
	p.process(402, 1, "sleep", "S", "sleep\x00100", "hrtimer_nanosleep", 0)
	p.write("sys/kernel/pid_max", "32768\n")
	p.write("sys/kernel/threads-max", "192730\n")
	p.write("loadavg", "3.50 2.25 1.00 2/32700 4242\n")
	p.write("vmstat", "nr_free_pages 1\noom_kill 7\n")
	cg.write("cpu/pleg-incident-100/cpu.cfs_quota_us", "1000\n")
	cg.write("cpu/pleg-incident-100/cpu.cfs_period_us", "1000000\n")
	cg.write("cpu/pleg-incident-100/cpu.stat", "nr_periods 100\nnr_throttled 90\nthrottled_time 80000000000\n")
	cg.write("cpu/system.slice/kubelet.service/cpu.cfs_quota_us", "-1\n")
	cg.write("cpu/system.slice/kubelet.service/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
	cg.write("pids/system.slice/containerd.service/pids.current", "120\n")
	cg.write("pids/system.slice/containerd.service/pids.max", "max\n")
	cg.write("blkio/pleg-incident-100/blkio.throttle.write_bps_device", "8:0 16\n")
	cg.write("blkio/pleg-incident-100/blkio.throttle.read_bps_device", "")
	cg.write("pids/kubepods/pids.current", "31990\n")
	cg.write("pids/kubepods/pids.max", "max\n")
	cg.write("pids/kubepods/besteffort/pod6f1d3c2a-1111-2222-3333-444455556666/pids.current", "31900\n")
	cg.write("pids/kubepods/besteffort/pod6f1d3c2a-1111-2222-3333-444455556666/pids.max", "max\n")
	cg.write("pids/kubepods/burstable/podaaaaaaaa-1111-2222-3333-444455556666/pids.current", "99\n")
	cg.write("pids/kubepods/burstable/podaaaaaaaa-1111-2222-3333-444455556666/pids.max", "100\n")
	cg.write("pids/kubepods/burstable/cpu.shares", "1024\n")
	return p, cg
}

func TestFullScan(t *testing.T) {
	p, cg := node(t)
	o := scanOptions{socket: "/run/containerd/containerd.sock", perProcess: time.Second, full: true,
		window: 10 * time.Millisecond, cgroup: cgroupFS{cg.root}, now: func() time.Time { return at },
		afterFirst: func() {
			// Over the window containerd's threads waited 1.8 s for a
			// CPU and ran 0.002 s; its cgroup was throttled in 9 periods
			// of 10. A process passing through D is not stuck.
			p.write("100/task/100/schedstat", "1001000000 1400000000 12\n")
			p.write("100/task/101/schedstat", "1001000000 1400000000 12\n")
			cg.write("cpu/pleg-incident-100/cpu.stat", "nr_periods 110\nnr_throttled 99\nthrottled_time 89000000000\n")
			p.setState(402, 1, "sleep", "D", 6000)
		}}
	got, err := Proc{Root: p.root}.scan(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !got.HostView || got.FoundBy != "socket" {
		t.Errorf("host view %t, found by %q", got.HostView, got.FoundBy)
	}
	byPid := map[int]Process{}
	var roles []string
	for _, pr := range got.List {
		byPid[pr.Pid] = pr
		roles = append(roles, pr.Comm+"/"+pr.Role)
	}
	want := []string{"containerd/runtime", "kubelet/kubelet", "containerd-shim/shim", "bridge/cni", "runc/oci",
		"cat/other", "vim/other", "pause/child"}
	if !slices.Equal(roles, want) {
		t.Errorf("processes %v, want %v (iptables is no CNI plugin; sleep passed through D)", roles, want)
	}
	rt := byPid[100]
	if rt.Sched == nil || rt.Sched.WaitedSeconds != 1.8 || rt.Sched.RanSeconds != 0.002 || rt.Sched.Threads != 2 {
		t.Errorf("containerd's scheduling %+v, want 1.8 s waited, 0.002 s ran, 2 threads", rt.Sched)
	}
	if c := rt.Cgroup; c == nil || c.CPUPath != "/cpu/pleg-incident-100" || c.CPUQuotaSeconds != 0.001 ||
		c.CPUPeriodSeconds != 1 || c.WindowPeriods != 10 || c.WindowThrottled != 9 || c.CPUThrottledSeconds != 89 {
		t.Errorf("containerd's cpu cgroup %+v", c)
	}
	if c := rt.Cgroup; c == nil || c.PidsCurrent != 120 || c.PidsMax != 0 ||
		!slices.Equal(c.IOLimits, []string{"write_bps_device 8:0 16"}) || c.IOPath != "/blkio/pleg-incident-100" {
		t.Errorf("containerd's pids and blkio %+v", c)
	}
	if rt.AgeSeconds != 900 || !rt.StartedAt.Equal(btime.Add(100*time.Second)) {
		t.Errorf("containerd's age %v, started %v", rt.AgeSeconds, rt.StartedAt)
	}
	if k := byPid[150]; k.Sched == nil || k.Cgroup == nil || k.Cgroup.CPUQuotaSeconds != 0 {
		t.Errorf("the kubelet %+v: want its scheduling and its cgroup without quota", k)
	}
	if r := byPid[202]; r.AgeSeconds != 95 || r.Subcommand != "kill" || r.ID != "4e1d0f5a2b3c4d5e6f708192a3b4c5d6" || r.Args0 != "runc" {
		t.Errorf("runc %+v: want 95 s old, kill of its container", r)
	}
	if c := byPid[300]; c.CNICommand != "ADD" || c.Name != "bridge" || c.Args0 != "/bin/sh" || c.AgeSeconds != 95 {
		t.Errorf("the CNI plugin %+v: want bridge, ADD, 95 s old", c)
	}
	if s := byPid[200]; s.ID != "abc" {
		t.Errorf("the shim's id %q, want its -id", s.ID)
	}
	if c, v := byPid[400], byPid[401]; !c.Held || !v.Held || c.WChan != "rpc_wait_bit_killable" {
		t.Errorf("cat %+v and vim %+v: want both held in their state", c, v)
	}
	for _, pr := range got.List {
		if strings.Contains(pr.Name+pr.Args0+pr.CNICommand+pr.ID, "hunter2") ||
			strings.Contains(pr.Name+pr.Args0+pr.CNICommand+pr.ID, "secret") {
			t.Errorf("a process kept its environment: %+v", pr)
		}
	}
}

func TestPidsState(t *testing.T) {
	p, cg := node(t)
	got := Proc{Root: p.root}.pidsState(cgroupFS{cg.root})
	if got == nil || got.Max != 32768 || got.ThreadsMax != 192730 || got.InUse != 32700 {
		t.Fatalf("pids %+v", got)
	}
	var of []string
	for _, c := range got.Cgroups {
		of = append(of, c.Of+" "+c.PodUID)
	}
	want := []string{"kubepods ", "pod aaaaaaaa-1111-2222-3333-444455556666", "pod 6f1d3c2a-1111-2222-3333-444455556666"}
	if !slices.Equal(of, want) || got.Cgroups[0].Current != 31990 || got.Cgroups[1].Max != 100 {
		t.Errorf("cgroups %+v, want kubepods, then the pod at 99 of 100, then the one holding 31,900", got.Cgroups)
	}
	if oom := (Proc{Root: p.root}).oomKills(); oom != 7 {
		t.Errorf("oom kills %d", oom)
	}
}

func TestCgroupV2(t *testing.T) {
	p := newFakeProc(t)
	cg := fakeCgroups{t, t.TempDir()}
	p.process(100, 1, "crio", "S", "/usr/bin/crio", "", 0)
	p.write("100/cgroup", "0::/system.slice/crio.service\n")
	cg.write("cgroup.controllers", "cpuset cpu io memory pids\n")
	d := "system.slice/crio.service/"
	cg.write(d+"cpu.max", "1000 1000000\n")
	cg.write(d+"cpu.stat", "usage_usec 1\nnr_periods 10\nnr_throttled 9\nthrottled_usec 5000000\n")
	cg.write(d+"pids.current", "4000\n")
	cg.write(d+"pids.max", "4096\n")
	cg.write(d+"io.max", "8:0 rbps=max wbps=16 riops=max wiops=1\n")
	cg.write("kubepods.slice/pids.current", "10\n")
	cg.write("kubepods.slice/pids.max", "110000\n")
	cg.write("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12345678_aaaa_bbbb.slice/pids.current", "7\n")
	c := Proc{Root: p.root}.cgroups(100, cgroupFS{cg.root}, true)
	if c == nil || c.CPUQuotaSeconds != 0.001 || c.CPUThrottled != 9 || c.CPUThrottledSeconds != 5 ||
		c.PidsCurrent != 4000 || c.PidsMax != 4096 || len(c.IOLimits) != 1 || c.PidsPath != "/system.slice/crio.service" {
		t.Errorf("v2 cgroup %+v", c)
	}
	pids := Proc{Root: p.root}.pidsState(cgroupFS{cg.root})
	if pids == nil || len(pids.Cgroups) != 2 || pids.Cgroups[0].Max != 110000 || pids.Cgroups[1].PodUID != "12345678-aaaa-bbbb" {
		t.Errorf("v2 kubepods %+v", pids)
	}
}

// Kubelets with a --cgroup-root of their own (kind's nodes, several on one
// host) put their pods' cgroups one level down: the one nearest its limit
// is read.
func TestKubepodsUnderACgroupRoot(t *testing.T) {
	p := newFakeProc(t)
	cg := fakeCgroups{t, t.TempDir()}
	cg.write("pids/node-a/kubepods/pids.current", "50\n")
	cg.write("pids/node-a/kubepods/pids.max", "max\n")
	cg.write("pids/node-b/kubepods/pids.current", "199\n")
	cg.write("pids/node-b/kubepods/pids.max", "200\n")
	cg.write("pids/node-b/kubepods/besteffort/pod6f1d3c2a-1111-2222-3333-444455556666/pids.current", "190\n")
	cg.write("cpu/node-b/kubepods/cpu.shares", "2\n")
	pids := Proc{Root: p.root}.pidsState(cgroupFS{cg.root})
	if pids == nil || len(pids.Cgroups) != 2 || pids.Cgroups[0].Path != "/pids/node-b/kubepods" || pids.Cgroups[0].Current != 199 ||
		pids.Cgroups[0].Max != 200 || pids.Cgroups[1].PodUID != "6f1d3c2a-1111-2222-3333-444455556666" {
		t.Errorf("kubepods %+v, want node-b's at 199 of 200 and its pod", pids)
	}
}

// What /proc and the cgroups say is data: malformed files leave their
// figures out, never fail the scan, never panic.
func TestMalformed(t *testing.T) {
	p := newFakeProc(t)
	cg := fakeCgroups{t, t.TempDir()}
	p.process(100, 1, "containerd", "S", "/usr/bin/containerd", "", 0)
	p.write("100/task/100/schedstat", "garbage\n")
	p.write("100/cgroup", "no colons\n::\n1:cpu\n")
	p.write("101/stat", "101 (x")
	p.write("102/stat", "102 (odd) name)) R 1 1")
	p.write("sys/kernel/pid_max", "lots\n")
	p.write("loadavg", "1 2\n")
	p.write("vmstat", "oom_kill x\n")
	cg.write("pids/kubepods/pids.current", "-\n")
	got, err := Proc{Root: p.root}.scan(t.Context(), scanOptions{full: true, window: time.Millisecond,
		cgroup: cgroupFS{cg.root}, perProcess: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.List) != 1 || got.List[0].Sched != nil || got.List[0].Cgroup != nil {
		t.Errorf("got %+v", got.List)
	}
	if s := (Proc{Root: p.root}).pidsState(cgroupFS{cg.root}); s != nil {
		t.Errorf("pids %+v, want none readable", s)
	}
	if _, ok := podUID("kubepods"); ok {
		t.Error("kubepods is no pod")
	}
}

func TestShimIdentityAndOCI(t *testing.T) {
	id, name := shimIdentity("conmon", []string{"/usr/bin/conmon", "-b", "/run/x", "-c", "abc123", "-n",
		"k8s_app_web-0_shop_1234_0", "--log-level", "info"})
	if id != "abc123" || name != "k8s_app_web-0_shop_1234_0" {
		t.Errorf("conmon: %q %q", id, name)
	}
	pr := Process{Comm: "runc"}
	describeOCI(&pr, []string{"runc", "--root", "/run/runc", "exec", "--process", "/tmp/p.json", "0123456789abcdef"})
	if pr.Subcommand != "exec (attached)" || pr.ID != "0123456789abcdef" {
		t.Errorf("runc exec: %+v", pr)
	}
	pr = Process{Comm: "runc:[2:INIT]"}
	describeOCI(&pr, nil)
	if pr.Subcommand != "init" {
		t.Errorf("runc init: %+v", pr)
	}
	if cniPlugin([]string{"/opt/cni/bin/calico", "x"}) != "calico" || cniPlugin([]string{"/usr/bin/iptables"}) != "" {
		t.Error("cniPlugin")
	}
}

// cri-dockerd is the CRI runtime where it runs: found by name before
// docker's own containerd, which is listed as an engine with dockerd.
func TestCRIDockerd(t *testing.T) {
	p := newFakeProc(t)
	p.process(50, 1, "dockerd", "S", "/usr/bin/dockerd", "", 0)
	p.process(60, 1, "containerd", "S", "/usr/bin/containerd", "", 0)
	p.process(100, 1, "cri-dockerd", "S", "/usr/bin/cri-dockerd", "", 0)
	got, err := Proc{Root: p.root}.scan(t.Context(), scanOptions{socket: "/run/cri-dockerd.sock", full: true,
		perProcess: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, pr := range got.List {
		roles = append(roles, pr.Comm+"/"+pr.Role)
	}
	if want := []string{"cri-dockerd/runtime", "dockerd/engine", "containerd/engine"}; !slices.Equal(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
}

// The recorder's looks keep, beside the runtime and its shims, only the
// commands they run that have lived past StuckCommandAge: a CNI plugin
// hung on ADD starts a recording at once, a runc passing through does
// not.
func TestLooksFindAStuckCommand(t *testing.T) {
	p, cg := node(t)
	p.processAt(203, 200, "runc", "S", "runc\x00create\x00abcdef0123456789", "", 0, startedAgo(time.Second))
	now := btime.Add(1000 * time.Second)
	r, err := New(Config{Dir: filepath.Join(t.TempDir(), "recordings"), Calls: NewCalls(nil),
		Source: &fakeSource{}, Endpoint: "unix:///run/containerd/containerd.sock", Proc: p.root, Cgroup: cg.root,
		Statfs: func(string) error { return nil }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	stuck := r.lookStuck(now)
	var got []string
	for _, pr := range stuck {
		got = append(got, pr.Comm+"/"+pr.Role+"/"+pr.CNICommand)
	}
	if want := []string{"bridge/cni/ADD", "runc/oci/"}; !slices.Equal(got, want) {
		t.Errorf("stuck %v, want %v (the CNI plugin and the runc 95 s old, not the new runc nor iptables)", got, want)
	}
	st := triggerState{fraction: DefaultFraction, floor: time.Minute}
	ok, f := st.step(observation{now: now, threshold: time.Minute, healthy: true, stuck: stuck})
	if !ok || f.kind != TriggerStuckProcess || f.reason != "the CNI plugin bridge (pid 300) has run ADD for 95 s" {
		t.Errorf("trigger %t %+v", ok, f)
	}
}
