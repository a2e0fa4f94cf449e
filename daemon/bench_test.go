// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
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
//	go test -run '^$' -bench DaemonRSS -benchtime 1x ./daemon/
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
	_ = lis.Close()
	daemon := start("run", "-r", "unix://"+sock, "--listen", addr, "--state-dir", "")

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

// BenchmarkIdleCPU100Pods measures the CPU time `pleg run` uses over a
// window (5 minutes, or $PLEG_BENCH_WINDOW) watching an idle `pleg sim` of
// 100 pods x 3 containers: relisting every second, and driven by the event
// stream with safety-net relists every 10 s and every 30 s (the default).
//
//	go test -run '^$' -bench IdleCPU -benchtime 1x -timeout 30m ./daemon/
func BenchmarkIdleCPU100Pods(b *testing.B) {
	window := 5 * time.Minute
	if w := os.Getenv("PLEG_BENCH_WINDOW"); w != "" {
		var err error
		if window, err = time.ParseDuration(w); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "pleg")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/plegkit/pleg/cmd/pleg").CombinedOutput(); err != nil {
		b.Fatalf("building pleg: %v\n%s", err, out)
	}
	for _, mode := range []struct{ name, mode, period string }{
		{"generic-1s", "generic", "30s"},
		{"evented-10s", "auto", "10s"},
		{"evented-30s", "auto", "30s"},
	} {
		b.Run(mode.name, func(b *testing.B) {
			sock := filepath.Join(dir, mode.name+".sock")
			start := func(args ...string) *exec.Cmd {
				cmd := exec.Command(bin, args...)
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				return cmd
			}
			start("sim", "--socket", sock, "--pods", "100", "--containers", "3", "--latency", "zero", "--churn", "")
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			addr := lis.Addr().String()
			_ = lis.Close()
			daemon := start("run", "-r", "unix://"+sock, "--listen", addr, "--mode", mode.mode, "--evented-relist-period", mode.period,
				"--state-dir", "")
			deadline := time.Now().Add(time.Minute)
			for !runningPods("http://"+addr, 100) {
				if time.Now().After(deadline) {
					b.Fatal("the daemon never saw the pods")
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(10 * time.Second) // past the first relist and the stream's hold
			before := cpuTime(b, daemon.Process.Pid)
			time.Sleep(window)
			used := cpuTime(b, daemon.Process.Pid) - before
			for b.Loop() {
			}
			b.ReportMetric(used.Seconds(), "cpu-s")
			b.ReportMetric(100*used.Seconds()/window.Seconds(), "%-of-a-core")
		})
	}
}

// cpuTime is the user and system time a process has used.
func cpuTime(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's closing parenthesis: utime and stime are
	// the 12th and 13th.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // clock ticks of 100 Hz
}

// BenchmarkProbeWithEveryConnectionHeld measures a kubelet-style probe
// (a new connection, GET /livez, closed) of the metrics listener, idle and
// with a client that holds every one of its 256 slots and 34 more, silent
// or in a header that never ends, and opens a new connection whenever one
// of its own is closed, as a client bent on holding them would. "max-ms"
// is the slowest probe of the run.
//
//	go test -run '^$' -bench ProbeWithEveryConnectionHeld ./daemon/
func BenchmarkProbeWithEveryConnectionHeld(b *testing.B) {
	for _, held := range []int{0, DefaultMaxConnections + 34} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			d, err := New(Config{Runtime: onePod(), Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0",
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- d.Run(ctx) }()
			defer func() {
				cancel()
				<-ran //nolint:errcheck // waits for the goroutine; its error is the cancellation's
			}()
			addr := d.MetricsAddr()
			done := make(chan struct{})
			defer close(done)
			for i := range held {
				go holdOne(addr, i%2 == 0, done)
			}
			for held > 0 && connections(b, d, "metrics") < DefaultMaxConnections {
				time.Sleep(10 * time.Millisecond)
			}
			probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			var slowest time.Duration
			for b.Loop() {
				start := time.Now()
				resp, err := probe.Get("http://" + addr + "/livez")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("/livez: %d", resp.StatusCode)
				}
				slowest = max(slowest, time.Since(start))
			}
			b.ReportMetric(float64(slowest)/float64(time.Millisecond), "max-ms")
		})
	}
}

// holdOne keeps a connection to addr open, silent or in an endless
// header, opening another whenever the server closes it, until done.
func holdOne(addr string, silent bool, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !silent {
			_, _ = fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		}
		closed := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, c)
			close(closed)
		}()
		select {
		case <-done:
			_ = c.Close()
			return
		case <-closed:
			_ = c.Close()
		}
	}
}
