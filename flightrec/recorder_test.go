// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
)

// shimCmdline is the command line of a shim of the node's containerd.
const shimCmdline = "/usr/bin/containerd-shim-runc-v2\x00-namespace\x00k8s.io\x00-id\x00abc\x00-address\x00" +
	"/run/containerd/containerd.sock\x00"

func TestProcessTree(t *testing.T) {
	p := newFakeProc(t)
	p.process(1, 0, "systemd", "S", "/sbin/init", "ep_poll", 0)
	p.process(100, 1, "containerd", "S", "/usr/bin/containerd", "futex_wait_queue", 777)
	p.process(200, 1, "containerd-shim", "T", shimCmdline, "do_signal_stop", 0)
	p.process(201, 200, "pause", "S", "/pause", "sys_pause", 0)
	p.process(202, 200, "nginx", "D", "nginx", "nfs_wait_on_request", 0)
	p.process(300, 1, "containerd-shim", "S", "containerd-shim-runc-v2\x00-address\x00/run/other.sock", "ep_poll", 0)
	got, err := Proc{Root: p.root}.scan(t.Context(), scanOptions{socket: "/run/containerd/containerd.sock",
		perProcess: time.Second, full: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.FoundBy != "socket" {
		t.Errorf("found the runtime by %q, want by its socket", got.FoundBy)
	}
	var roles []string
	for _, pr := range got.List {
		roles = append(roles, strings.Join([]string{pr.Comm, pr.Role, pr.State}, "/"))
	}
	want := []string{"containerd/runtime/S", "containerd-shim/shim/T", "nginx/child/D", "pause/child/S"}
	if !slices.Equal(roles, want) {
		t.Errorf("processes %v, want %v (the other containerd's shim left out, the stuck before the others)", roles, want)
	}
	shim := got.List[1]
	if shim.WChan != "do_signal_stop" || shim.CPUSeconds != 4 || shim.RSSBytes != 2<<20 || shim.KernelStack == "" {
		t.Errorf("shim %+v: want its wchan, 4 s of CPU, 2 MiB and its kernel stack", shim)
	}
	if got.List[2].ThreadsD != 1 {
		t.Errorf("nginx in D: %d threads in D, want 1", got.List[3].ThreadsD)
	}
}

func TestRuntimeFoundByNameWithoutSocket(t *testing.T) {
	p := newFakeProc(t)
	p.process(100, 1, "crio", "S", "/usr/bin/crio", "", 0)
	p.process(200, 1, "conmon", "S", "/usr/bin/conmon\x00-c\x00abc", "", 0)
	got, err := Proc{Root: p.root}.scan(t.Context(), scanOptions{socket: "/run/crio/crio.sock", perProcess: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got.FoundBy != "name" || len(got.List) != 2 || got.List[0].Comm != "crio" || got.List[1].Role != "shim" {
		t.Errorf("got %+v, want crio found by name and conmon as its shim", got)
	}
}

// In a pod, the socket's owner cannot be read (another network
// namespace, no capabilities): among several runtimes of the name, the
// one whose command line names the socket is the node's, not the first.
func TestRuntimeFoundByCommandLine(t *testing.T) {
	p := newFakeProc(t)
	p.write("net/unix", "Num       RefCount Protocol Flags    Type St Inode Path\n")
	p.process(100, 1, "containerd", "S", "/usr/bin/containerd\x00--address\x00/tmp/a/c.sock", "", 0)
	p.process(200, 1, "containerd", "T", "/usr/bin/containerd\x00--config\x00/tmp/b/config.toml\x00--address\x00/tmp/b/c.sock",
		"do_signal_stop", 0)
	got, err := Proc{Root: p.root}.scan(t.Context(), scanOptions{socket: "/tmp/b/c.sock", perProcess: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got.FoundBy != "command line" || got.pidOf("runtime") != 200 {
		t.Errorf("found the runtime %d by %q, want 200 by its command line", got.pidOf("runtime"), got.FoundBy)
	}
}

func TestHostState(t *testing.T) {
	p := newFakeProc(t)
	h := Proc{Root: p.root}.hostState()
	if h.PressureAbsent || h.Pressure["io"].SomeAvg10 != 82.25 || h.Pressure["io"].FullAvg10 != 60 {
		t.Errorf("pressure %+v", h.Pressure)
	}
	if h.Load != [3]float64{3.5, 2.25, 1} {
		t.Errorf("load %v", h.Load)
	}
	if h.Memory["MemAvailable"] != 2048<<10 || h.Memory["SwapFree"] != 1024<<10 {
		t.Errorf("memory %v", h.Memory)
	}
	if err := os.RemoveAll(filepath.Join(p.root, "pressure")); err != nil {
		t.Fatal(err)
	}
	if h := (Proc{Root: p.root}).hostState(); !h.PressureAbsent || h.Pressure != nil {
		t.Errorf("without /proc/pressure: %+v, want its absence told", h)
	}
}

func TestMountsThatDoNotAnswer(t *testing.T) {
	p := newFakeProc(t)
	release := make(chan struct{})
	var mu sync.Mutex
	calls := map[string]int{}
	statfs := func(path string) error {
		mu.Lock()
		calls[path]++
		mu.Unlock()
		if path == "/mnt/nfs share" {
			<-release
		}
		return nil
	}
	defer close(release)
	m := newMountProber(statfs)
	mps, prefix, err := Proc{Root: p.root}.mountPoints()
	if err != nil {
		t.Fatal(err)
	}
	if prefix != "" {
		t.Errorf("prefix %q without pid 1, want none", prefix)
	}
	if !slices.Equal(mps, []string{"/", "/mnt/nfs share"}) {
		t.Fatalf("mount points %q", mps)
	}
	for range 2 {
		if hung := m.probe(mps, prefix, 50*time.Millisecond); !slices.Equal(hung, []string{"/mnt/nfs share"}) {
			t.Errorf("hung mounts %q, want the NFS share", hung)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := calls["/mnt/nfs share"]; n != 1 {
		t.Errorf("the hung mount was stat'ed %d times, want once while the first stat is blocked", n)
	}
}

func TestMountsOfPid1AreStatedThroughItsRoot(t *testing.T) {
	p := newFakeProc(t)
	p.process(1, 0, "systemd", "S", "/sbin/init", "", 0)
	p.write("1/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n40 22 0:50 / /var/lib/kubelet rw - ext4 /dev/sdb rw\n"+
		"41 22 0:51 / /var/lib/kubelet rw - tmpfs tmpfs rw\n")
	mkdirs(t, filepath.Join(p.root, "1", "root"))
	mps, prefix, err := Proc{Root: p.root}.mountPoints()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mps, []string{"/", "/var/lib/kubelet"}) || prefix != filepath.Join(p.root, "1", "root") {
		t.Fatalf("mounts %q under %q, want pid 1's under its root", mps, prefix)
	}
	var stated []string
	var mu sync.Mutex
	m := newMountProber(func(path string) error { mu.Lock(); stated = append(stated, path); mu.Unlock(); return nil })
	if hung := m.probe(mps, prefix, time.Second); len(hung) != 0 {
		t.Errorf("hung %q", hung)
	}
	slices.Sort(stated)
	if want := []string{prefix + "/", prefix + "/var/lib/kubelet"}; !slices.Equal(stated, want) {
		t.Errorf("stated %q, want %q", stated, want)
	}
}

// In pid 1's own mount namespace (pleg doctor on the host) the mounts are
// stat'ed where they are.
func TestMountsInPid1sNamespaceAreStatedDirectly(t *testing.T) {
	p := newFakeProc(t)
	p.process(1, 0, "systemd", "S", "/sbin/init", "", 0)
	p.write("1/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n50 22 0:60 / /mnt/fuse rw - fuse bindfs rw\n")
	mkdirs(t, filepath.Join(p.root, "1", "root"))
	for _, pid := range []string{"1", "self"} {
		if err := os.MkdirAll(filepath.Join(p.root, pid, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("mnt:[4026531832]", filepath.Join(p.root, pid, "ns", "mnt")); err != nil {
			t.Fatal(err)
		}
	}
	mps, prefix, err := Proc{Root: p.root}.mountPoints()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mps, []string{"/", "/mnt/fuse"}) || prefix != "" {
		t.Fatalf("mounts %q under %q, want pid 1's under no prefix", mps, prefix)
	}
}

// Where pid 1's root cannot be entered (a sandbox's pid 1 of another
// user namespace), its mounts would all fail their statfs at once and pass
// for answering: pleg's own are stat'ed instead, where they are.
func TestMountsWithoutPid1sRootArePlegsOwn(t *testing.T) {
	p := newFakeProc(t)
	p.process(1, 0, "init", "S", "/init", "", 0)
	p.write("1/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
	p.write("self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n50 22 0:60 / /mnt/fuse rw - fuse bindfs rw\n")
	mps, prefix, err := Proc{Root: p.root}.mountPoints()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mps, []string{"/", "/mnt/fuse"}) || prefix != "" {
		t.Fatalf("mounts %q under %q, want pleg's own under no prefix", mps, prefix)
	}
}

func mkdirs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestKernelLogFilter(t *testing.T) {
	records := []string{
		"6,100,1000000,-;eth0: link up\n",
		"3,101,2000000,-;INFO: task containerd:123 blocked for more than 120 seconds.\n",
		"3,102,3000000,-;Out of memory: Killed process 42 (java)\n SUBSYSTEM=x\n",
		"3,103,500,-;blk_update_request: I/O error, dev sda\n",
	}
	got := parseKmsg(records, 1500000)
	want := []string{"[2.000000] INFO: task containerd:123 blocked for more than 120 seconds.",
		"[3.000000] Out of memory: Killed process 42 (java)"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSyslogFilter(t *testing.T) {
	lines := []string{"<6>[    1.000000] eth0: link up", "<3>[  200.500000] INFO: task runc:9 blocked for more than 120 seconds.",
		"<3>[   0.100000] Out of memory: early", "garbage"}
	got := parseSyslog(lines, 1500000)
	if want := []string{"[200.500000] INFO: task runc:9 blocked for more than 120 seconds."}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestKernelLogWithoutKmsgFallsBackToSyslog(t *testing.T) {
	lines, err := kernelLog(filepath.Join(t.TempDir(), "no-kmsg"), 0, 1<<20)
	if err != nil {
		// A kernel with dmesg_restrict and no CAP_SYSLOG refuses both:
		// the error names both.
		if !strings.Contains(err.Error(), "syslog(2)") {
			t.Errorf("error %v does not tell the syslog(2) fallback", err)
		}
		return
	}
	for _, l := range lines {
		if !kernelLogPattern.MatchString(l) {
			t.Errorf("a line the filter does not match: %q", l)
		}
	}
}

func TestStoreBounds(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "recordings"), MaxCount: 3, MaxBytes: 1 << 20}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var all []string
	for i := range 5 {
		rec := &Recording{Version: FormatVersion, Name: recordingName(t0.Add(time.Duration(i)*time.Minute), TriggerUnhealthy)}
		all = append(all, rec.Name)
		dropped, err := s.Write(rec)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 3 && !slices.Equal(dropped, all[i-3:i-2]) {
			t.Errorf("write %d dropped %q, want the oldest %q", i, dropped, all[i-3])
		}
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
		fi, err := os.Stat(filepath.Join(s.Dir, e.Name+ext))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", e.Name, fi.Mode().Perm())
		}
	}
	if !slices.Equal(names, all[2:]) {
		t.Errorf("kept %q, want the newest three %q", names, all[2:])
	}
	if fi, err := os.Stat(s.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory %v %v, want 0700", fi.Mode(), err)
	}
	// By size: a cap below two recordings keeps the newest alone.
	one := list[0].Bytes
	s.MaxBytes, s.MaxCount = one+one/2, 10
	rec := &Recording{Version: FormatVersion, Name: recordingName(t0.Add(time.Hour), TriggerManual)}
	if _, err := s.Write(rec); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(); len(list) != 1 || list[0].Name != rec.Name {
		t.Errorf("kept %+v, want the newest alone", list)
	}
	for _, bad := range []string{"../etc/passwd", "x", "20261126T120000.000Z-unhealthy/../x"} {
		if _, err := s.Read(bad); err == nil {
			t.Errorf("Read(%q) did not fail", bad)
		}
	}
}

// hangingSocket is a unix socket that accepts connections and never
// answers: a runtime's debug socket whose runtime is stuck.
func hangingSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "debug.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return path
}

// versionFunc is a runtime's Version call.
type versionFunc func(ctx context.Context) error

func (f versionFunc) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2"}, f(ctx)
}

func TestHangingProbesAreCutAndTheRestKept(t *testing.T) {
	p := newFakeProc(t)
	p.process(100, 1, "containerd", "T", "/usr/bin/containerd", "do_signal_stop", 777)
	p.process(200, 1, "containerd-shim", "S", shimCmdline, "ep_poll", 0)
	calls := NewCalls(nil)
	n := calls.start("podsandbox_status", "sb1")
	defer calls.end(n, nil)
	release := make(chan struct{})
	defer close(release)
	r, err := New(Config{
		Dir: filepath.Join(t.TempDir(), "recordings"), Calls: calls,
		Source:      &fakeSource{st: pleg.Status{RelistThreshold: 3 * time.Minute}},
		Runtime:     versionFunc(func(ctx context.Context) error { <-release; return nil }),
		Endpoint:    "unix:///run/containerd/containerd.sock",
		DebugSocket: hangingSocket(t),
		PartTimeout: 300 * time.Millisecond,
		Proc:        p.root,
		Statfs:      func(string) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Take(t.Context(), TriggerManual, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]Part{}
	for _, p := range rec.Parts {
		parts[p.Name] = p
	}
	for _, name := range []string{PartRuntimeStacks, PartVersion} {
		if !parts[name].TimedOut {
			t.Errorf("part %s: %+v, want it cut at its deadline", name, parts[name])
		}
	}
	for _, name := range []string{PartPleg, PartProcesses, PartHost, PartMounts} {
		if parts[name].TimedOut || parts[name].Error != "" {
			t.Errorf("part %s: %+v, want it kept", name, parts[name])
		}
	}
	if rec.Processes == nil || len(rec.Processes.List) != 2 || rec.Processes.List[0].State != "T" {
		t.Errorf("processes %+v, want containerd in T and its shim", rec.Processes)
	}
	if rec.Pleg == nil || len(rec.Pleg.InFlight) != 1 || rec.Pleg.InFlight[0].ID != "sb1" {
		t.Errorf("pleg's view %+v, want the sandbox status in flight", rec.Pleg)
	}
	if rec.Host == nil || rec.Host.Pressure["io"].SomeAvg10 != 82.25 {
		t.Errorf("host %+v", rec.Host)
	}
	if rec.Parts[0].Skipped != "" || parts[PartKernelLog].Skipped == "" {
		t.Errorf("the kernel log was read without opting in: %+v", parts[PartKernelLog])
	}
	back, err := r.Store().Read(rec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if back.Name != rec.Name || !back.Parts[3].TimedOut {
		t.Errorf("read back %+v", back)
	}
}

func TestCmdlineCache(t *testing.T) {
	p := newFakeProc(t)
	p.process(200, 1, "containerd-shim", "S", shimCmdline, "", 0)
	c := newCmdlineCache()
	if got := c.get(Proc{Root: p.root}, 200, 6000, time.Second); !strings.Contains(got, "-address") {
		t.Fatalf("cmdline %q", got)
	}
	p.write("200/cmdline", "changed")
	if got := c.get(Proc{Root: p.root}, 200, 6000, time.Second); !strings.Contains(got, "-address") {
		t.Errorf("the same process read again: %q", got)
	}
	if got := c.get(Proc{Root: p.root}, 200, 7000, time.Second); got != "changed" {
		t.Errorf("a new process of the same pid: %q", got)
	}
}
