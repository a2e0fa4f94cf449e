package daemon

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkDaemonRSS10kPods measures the memory of `pleg run` watching a
// `pleg sim` of 10,000 pods x 3 containers, each in its own process: the
// resident set once the daemon has relisted for a while, then after it
// served the whole pod cache on /v1/pods, and its peak.
//
//	go test -run '^$' -bench DaemonRSS -benchtime 1x ./internal/daemon/
func BenchmarkDaemonRSS10kPods(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "pleg")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/plegkit/pleg/cmd/pleg").CombinedOutput(); err != nil {
		b.Fatalf("building pleg: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "sim.sock")
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	start("sim", "--socket", sock, "--pods", "10000", "--containers", "3", "--latency", "zero", "--churn", "")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	daemon := start("run", "-r", "unix://"+sock, "--listen", addr)

	base := "http://" + addr
	deadline := time.Now().Add(2 * time.Minute)
	for !runningPods(base, 10000) {
		if time.Now().After(deadline) {
			b.Fatal("the daemon never saw the 10,000 pods")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(10 * time.Second) // ten relists more
	steady, _ := memory(b, daemon.Process.Pid)
	resp, err := http.Get(base + "/v1/pods")
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	served, peak := memory(b, daemon.Process.Pid)
	for b.Loop() {
	}
	b.ReportMetric(steady, "MB-rss")
	b.ReportMetric(served, "MB-rss-after-/v1/pods")
	b.ReportMetric(peak, "MB-peak")
	b.ReportMetric(float64(n)/(1<<20), "MB-/v1/pods")
}

func runningPods(base string, want int) bool {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "kubelet_running_pods "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n) == want
		}
	}
	return false
}

// memory returns a process's resident set and its peak, in MiB.
func memory(b *testing.B, pid int) (rss, peak float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}
