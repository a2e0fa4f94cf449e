// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// fakeNode writes a /proc tree and cgroup file systems: the runtime owns
// the simulator's socket, the kubelet runs in a cgroup allowed 1 ms of
// CPU every 100 ms, a reader waits in D on a network file system.
func fakeNode(t *testing.T, socket string) (proc, cgroup string) {
	t.Helper()
	proc, cgroup = t.TempDir(), t.TempDir()
	write := func(root, name, content string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	boot := time.Now().Add(-time.Hour).Unix()
	write(proc, "stat", fmt.Sprintf("cpu 1 2 3\nbtime %d\n", boot))
	write(proc, "loadavg", "1.00 1.00 1.00 1/700 42\n")
	write(proc, "meminfo", "MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n")
	write(proc, "sys/kernel/pid_max", "32768\n")
	write(proc, "sys/kernel/threads-max", "100000\n")
	write(proc, "net/unix", "Num RefCount Protocol Flags Type St Inode Path\n0: 00000002 0 10000 0001 01 777 "+socket+"\n")
	write(proc, "self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
	process := func(pid, ppid int, comm, state, wchan, cmdline string) {
		t.Helper()
		write(proc, fmt.Sprintf("%d/stat", pid), fmt.Sprintf("%d (%s) %s %d 1 1 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 %d 1000 10\n",
			pid, comm, state, ppid, 100*60))
		write(proc, fmt.Sprintf("%d/wchan", pid), wchan)
		write(proc, fmt.Sprintf("%d/cmdline", pid), cmdline)
		write(proc, fmt.Sprintf("%d/status", pid), "VmRSS: 1024 kB\n")
	}
	process(2, 0, "kthreadd", "S", "kthreadd", "")
	process(100, 1, "containerd", "S", "futex_wait_queue", "/usr/bin/containerd")
	if err := os.MkdirAll(filepath.Join(proc, "100", "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("socket:[777]", filepath.Join(proc, "100", "fd", "3")); err != nil {
		t.Fatal(err)
	}
	process(150, 1, "kubelet", "S", "futex_wait_queue", "/usr/bin/kubelet")
	write(proc, "150/cgroup", "1:cpu:/kubelet.slice\n")
	write(cgroup, "cpu/kubelet.slice/cpu.cfs_quota_us", "1000\n")
	write(cgroup, "cpu/kubelet.slice/cpu.cfs_period_us", "100000\n")
	write(cgroup, "cpu/kubelet.slice/cpu.stat", "nr_periods 5000\nnr_throttled 4900\nthrottled_time 480000000000\n")
	process(400, 1, "cat", "D", "nfs_wait_bit_killable", "cat\x00/mnt/nfs/x")
	return proc, cgroup
}

// fakeKubeletMetrics serves a kubelet's /metrics whose PLEG was last seen
// 95 s before each request, to the bearer token "t".
func fakeKubeletMetrics(t *testing.T) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" || r.URL.Path != "/metrics" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = fmt.Fprintf(w, "# TYPE kubelet_pleg_last_seen_seconds gauge\nkubelet_pleg_last_seen_seconds %.3f\n"+
			"# TYPE kubelet_pleg_relist_duration_seconds histogram\n"+
			"kubelet_pleg_relist_duration_seconds_bucket{le=\"0.005\"} 990\n"+
			"kubelet_pleg_relist_duration_seconds_bucket{le=\"10\"} 1000\n"+
			"kubelet_pleg_relist_duration_seconds_bucket{le=\"+Inf\"} 1000\n"+
			"kubelet_pleg_relist_duration_seconds_sum 20\nkubelet_pleg_relist_duration_seconds_count 1000\n",
			float64(time.Now().UnixMilli())/1000-95.5)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pleg doctor reads the node below the CRI and the kubelet's own PLEG:
// with the runtime answering quickly and the kubelet held back by its
// cgroup's quota, the first finding says the kubelet is starved, in the
// words the golden file keeps.
func TestDoctorReadsTheNodeAndTheKubelet(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1})
	socket := strings.TrimPrefix(s.Endpoint(), "unix://")
	proc, cgroup := fakeNode(t, socket)
	kubelet := fakeKubeletMetrics(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"doctor", "-r", s.Endpoint(), "--budget", "20s", "--state-dir", "", "--proc-root", proc,
		"--cgroup-root", cgroup, "--kernel-log=false", "--kubelet", kubelet.URL, "--kubelet-token-file", token,
		"--kubelet-insecure-skip-tls-verify"}
	code, out, errOut := execArgs(t, append(args, "-o", "json")...)
	var r doctor.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s%s", code, err, out, errOut)
	}
	if code != 2 || len(r.Findings) < 2 || r.Findings[0].ID != "kubelet-starved" || r.Node == nil ||
		r.Node.Kubelet == nil || r.Node.Kubelet.Relists.Count != 1000 {
		t.Fatalf("exit %d, findings %+v, node %+v", code, r.Findings, r.Node)
	}
	if age := r.Node.Kubelet.LastSeenAgeSeconds; age < 90 || age > 95.6 {
		t.Errorf("the kubelet's PLEG last seen %v s ago, want about 95", age)
	}
	_, text, _ := execArgs(t, args...)
	findings, _, ok := strings.Cut(text, "\nRuntime\n")
	if !ok {
		t.Fatalf("no Runtime section:\n%s", text)
	}
	// The kubelet's address has the test server's port, the simulator's
	// socket a directory of the test's, its answers this machine's speed.
	findings = regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(findings, "127.0.0.1:PORT")
	findings = strings.ReplaceAll(findings, s.Endpoint(), "unix:///run/containerd/containerd.sock")
	findings = regexp.MustCompile(`answers its lists in [0-9.]+ m?s`).ReplaceAllString(findings, "answers its lists in 1 ms")
	// The age is the read's time less the kubelet's: a busy machine's
	// TLS handshake comes between them (checked in the JSON above).
	findings = regexp.MustCompile(`last seen active 9\d s ago`).ReplaceAllString(findings, "last seen active 95 s ago")
	golden(t, "doctor-node.txt", []byte(findings))
	for _, want := range []string{"The node below the CRI", "kubelet (pid 150): cpu /cpu/kubelet.slice quota 0.001 s of 0.1 s",
		"The kubelet's PLEG, from https://127.0.0.1:"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
}

// A way to the kubelet that cannot be made is told in the report, not a
// failed diagnosis; --kubelet takes only its words and URLs.
func TestDoctorKubeletFlags(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 1, Containers: 1})
	proc, cgroup := fakeNode(t, strings.TrimPrefix(s.Endpoint(), "unix://"))
	code, out, _ := execArgs(t, "doctor", "-r", s.Endpoint(), "--budget", "20s", "--state-dir", "", "--proc-root", proc,
		"--cgroup-root", cgroup, "--kernel-log=false", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "-o", "json")
	var r doctor.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if r.Node == nil || r.Node.Kubelet == nil || !strings.Contains(r.Node.Kubelet.Error, "--kubeconfig") {
		t.Errorf("a kubeconfig that does not load: %+v", r.Node)
	}
	for _, bad := range [][]string{{"--kubelet", "10.0.0.1:10250"}, {"--kubelet-ca-file", "x", "--kubelet-insecure-skip-tls-verify"}} {
		if code, _, errOut := execArgs(t, append([]string{"doctor", "-r", s.Endpoint()}, bad...)...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d %q", bad, code, errOut)
		}
	}
}
