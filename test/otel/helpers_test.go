// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bins are the binaries the tests run, built once by TestMain.
var bins struct {
	pleg, otelcol string
	err           error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pleg-otel-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.pleg, bins.otelcol = filepath.Join(dir, "pleg"), filepath.Join(dir, "otelcol")
	bins.err = build(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// build builds pleg from the checkout and the collector from ./otelcol.
func build(dir string) error {
	for _, b := range []struct{ dir, pkg, out string }{
		{"../..", "./cmd/pleg", bins.pleg},
		{".", "./otelcol", bins.otelcol},
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s in %s: %w\n%s", b.pkg, b.dir, err, out)
		}
	}
	return nil
}

// require fails the test under CI=true, and skips it elsewhere, when the
// binaries could not be built.
func require(t testing.TB) {
	t.Helper()
	if bins.err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the collector and pleg are required under CI=true but could not be built: %v", bins.err)
	}
	t.Skipf("skipping, no collector or pleg (set CI=true to make this a failure): %v", bins.err)
}

// freePort returns a port of 127.0.0.1 that is free now.
//
// The port is below the kernel's ephemeral range: a collector stopped for
// an outage and started again takes the same port, and a port of the
// ephemeral range freed meanwhile may become any outgoing connection's
// (on a busy machine, one did). Below the range only a listener that asks
// for that very port can take it. (internal/testing/freeport does the
// same for the root module's harnesses; this module requires nothing of
// the root module's.)
func freePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 100 {
		port := 10000 + rand.IntN(max(low-10000, 1))
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: another
		}
		_ = l.Close()
		return port
	}
	t.Fatalf("no free port between 10000 and %d", low)
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 10000 {
		return 32768
	}
	return low
}

// eventually waits for f, up to limit, polling.
func eventually(t testing.TB, limit time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proc is a started process whose output goes to a file.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, log string, bin string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("starting %s: %v", bin, err)
	}
	p := &proc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	return p
}

// signal sends sig and waits for the process to end.
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// collector is a real OpenTelemetry Collector receiving OTLP on fixed
// loopback ports and writing what it receives to a file per start.
type collector struct {
	t          testing.TB
	dir        string
	grpc, http int
	p          *proc
	starts     int
}

func newCollector(t testing.TB) *collector {
	require(t)
	return &collector{t: t, dir: t.TempDir(), grpc: freePort(t), http: freePort(t)}
}

const collectorConfig = `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 512
    spike_limit_mib: 128
exporters:
  file:
    path: %s
    flush_interval: 100ms
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      processors: [memory_limiter]
      exporters: [file]
`

// start starts the collector and waits for its receivers.
func (c *collector) start() {
	c.t.Helper()
	c.starts++
	cfg := filepath.Join(c.dir, fmt.Sprintf("config-%d.yaml", c.starts))
	out := filepath.Join(c.dir, fmt.Sprintf("out-%03d.json", c.starts))
	if err := os.WriteFile(cfg, fmt.Appendf(nil, collectorConfig, c.grpc, c.http, out), 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.p = startProc(c.t, filepath.Join(c.dir, "collector.log"), bins.otelcol, "--config", cfg)
	eventually(c.t, time.Minute, "the collector's receivers", func() bool {
		select {
		case <-c.p.done:
			c.t.Fatalf("the collector exited:\n%s", tail(c.p.output(), 30))
		default:
		}
		for _, port := range []int{c.grpc, c.http} {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				return false
			}
			_ = conn.Close()
		}
		return true
	})
}

// stop stops the collector as an operator would: SIGTERM, which flushes
// the file.
func (c *collector) stop() { c.p.signal(syscall.SIGTERM) }

func (c *collector) grpcEndpoint() string { return fmt.Sprintf("127.0.0.1:%d", c.grpc) }
func (c *collector) httpEndpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", c.http) }

// record is a log record as the collector wrote it.
type record struct {
	journal   string
	node      string
	eventName string
	seq       uint64
	// lostFrom, lostTo and lostReason are a loss record's.
	lostFrom, lostTo uint64
	lostReason       string
	// body and attrs are the record's own.
	body  string
	attrs map[string]string
}

// records reads what the collector wrote, in the order it wrote it.
func (c *collector) records() []record {
	c.t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.dir, "out-*.json"))
	sort.Strings(files)
	var out []record
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, parseRecords(c.t, b)...)
	}
	return out
}

type otlpValue struct {
	StringValue *string `json:"stringValue"`
	IntValue    *string `json:"intValue"`
}

type otlpKV struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpLine struct {
	ResourceLogs []struct {
		Resource struct {
			Attributes []otlpKV `json:"attributes"`
		} `json:"resource"`
		ScopeLogs []struct {
			LogRecords []struct {
				EventName  string   `json:"eventName"`
				Attributes []otlpKV `json:"attributes"`
				Body       struct {
					StringValue string `json:"stringValue"`
				} `json:"body"`
			} `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

func attrMap(kvs []otlpKV) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch {
		case kv.Value.StringValue != nil:
			m[kv.Key] = *kv.Value.StringValue
		case kv.Value.IntValue != nil:
			m[kv.Key] = *kv.Value.IntValue
		}
	}
	return m
}

func parseRecords(t testing.TB, b []byte) []record {
	t.Helper()
	var out []record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l otlpLine
		if err := json.Unmarshal(line, &l); err != nil {
			// The last line may be half flushed: read again later.
			break
		}
		for _, rl := range l.ResourceLogs {
			res := attrMap(rl.Resource.Attributes)
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					a := attrMap(lr.Attributes)
					r := record{journal: res["pleg.journal.id"], node: res["k8s.node.name"], eventName: lr.EventName,
						body: lr.Body.StringValue, attrs: a}
					r.seq, _ = strconv.ParseUint(a["pleg.seq"], 10, 64)
					r.lostFrom, _ = strconv.ParseUint(a["pleg.lost.first_seq"], 10, 64)
					r.lostTo, _ = strconv.ParseUint(a["pleg.lost.last_seq"], 10, 64)
					r.lostReason = a["pleg.lost.reason"]
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// plegRun is pleg run over a pleg sim, restartable.
type plegRun struct {
	t       testing.TB
	dir     string
	port    int
	args    []string
	p       *proc
	starts  int
	sim     *proc
	simSock string
}

// startSim serves a simulated runtime with churn.
func startPleg(t testing.TB, churn string, args ...string) *plegRun {
	t.Helper()
	return startPlegOver(t, []string{"--pods", "10", "--containers", "2", "--latency", "zero", "--churn", churn, "--seed", "7"},
		args...)
}

// startPlegOver starts pleg sim with simArgs, then pleg run over it with
// args.
func startPlegOver(t testing.TB, simArgs []string, args ...string) *plegRun {
	t.Helper()
	require(t)
	dir := t.TempDir()
	r := &plegRun{t: t, dir: dir, port: freePort(t), simSock: filepath.Join(dir, "sim.sock")}
	r.sim = startProc(t, filepath.Join(dir, "sim.log"), bins.pleg, append([]string{"sim", "--socket", r.simSock}, simArgs...)...)
	eventually(t, time.Minute, "the simulator's socket", func() bool {
		_, err := os.Stat(r.simSock)
		return err == nil
	})
	r.args = append([]string{
		"run", "--runtime-endpoint", "unix://" + r.simSock, "--listen", fmt.Sprintf("127.0.0.1:%d", r.port),
		"--state-dir", filepath.Join(dir, "state"), "--relist-period", "200ms",
	}, args...)
	r.start()
	return r
}

func (r *plegRun) start() {
	r.t.Helper()
	r.starts++
	r.p = startProc(r.t, filepath.Join(r.dir, "pleg.log"), bins.pleg, r.args...)
	eventually(r.t, time.Minute, "pleg's /readyz", func() bool {
		select {
		case <-r.p.done:
			r.t.Fatalf("pleg exited:\n%s", tail(r.p.output(), 30))
		default:
		}
		resp, err := http.Get(r.url("/readyz"))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (r *plegRun) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", r.port, path) }

// metric reads a sample of pleg's /metrics, the name with its labels as
// written there; -1 if absent.
func (r *plegRun) metric(name string) float64 {
	resp, err := http.Get(r.url("/metrics"))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// first is the journal's first sequence number: its first event, or the
// start of the gap that stands for what it dropped.
func (r *plegRun) first() uint64 {
	first, _ := r.held()
	return first
}

// held returns the journal's first number and the first it still holds.
func (r *plegRun) held() (first, floor uint64) {
	r.t.Helper()
	resp, err := http.Get(r.url("/v1/events?since=0"))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev struct {
		Seq  uint64 `json:"seq"`
		Type string `json:"type"`
		From uint64 `json:"from"`
		To   uint64 `json:"to"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		r.t.Fatal(err)
	}
	if ev.Type == "Gap" {
		return ev.From, ev.To + 1
	}
	return ev.Seq, ev.Seq
}

// quiesce stops the churn (the simulator) and waits until pleg has
// exported all its journal holds; it returns the last sequence number.
func (r *plegRun) quiesce(limit time.Duration) uint64 {
	r.t.Helper()
	r.sim.signal(syscall.SIGTERM)
	var last float64
	eventually(r.t, limit, "the export to catch up with the journal", func() bool {
		lag := r.metric("pleg_export_lag_events")
		last = r.metric("pleg_export_cursor")
		return lag == 0 && last > 0
	})
	return uint64(last)
}

// waitFor waits until the collector has written a record numbered seq
// (its file exporter flushes every 100 ms).
func (c *collector) waitFor(seq uint64) {
	c.t.Helper()
	eventually(c.t, time.Minute, fmt.Sprintf("record %d at the collector", seq), func() bool {
		for _, r := range c.records() {
			if r.seq == seq || (r.lostFrom <= seq && seq <= r.lostTo) {
				return true
			}
		}
		return false
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tally accounts for every number from first to last in what the
// collector received.
type tally struct {
	sent, received, duplicated, lost, lossRecords int
	missing                                       []uint64
	// runs are the lengths of the resent stretches: at each, the
	// numbers went back.
	resends []int
	// outOfOrder are numbers that skipped ahead with no loss record.
	outOfOrder []string
	journals   map[string]bool
}

func account(recs []record, first, last uint64) tally {
	tl := tally{sent: int(last - first + 1), journals: map[string]bool{}}
	seen := map[uint64]int{}
	prev := first - 1
	inResend := false
	for _, r := range recs {
		tl.journals[r.journal] = true
		if r.eventName == "pleg.EventsLost" {
			tl.lossRecords++
			for s := r.lostFrom; s <= r.lostTo; s++ {
				seen[s]++
				tl.lost++
			}
			prev = max(prev, r.lostTo)
			inResend = false
			continue
		}
		if r.seq < first || r.seq > last {
			continue
		}
		seen[r.seq]++
		switch {
		case r.seq <= prev:
			// Sent again: the batch in flight when pleg was killed.
			tl.duplicated++
			if !inResend {
				tl.resends = append(tl.resends, 0)
				inResend = true
			}
			tl.resends[len(tl.resends)-1]++
			if seen[r.seq] == 1 {
				tl.outOfOrder = append(tl.outOfOrder, fmt.Sprintf("%d arrived late, after %d", r.seq, prev))
			}
			continue
		case r.seq > prev+1:
			tl.outOfOrder = append(tl.outOfOrder, fmt.Sprintf("%d after %d", r.seq, prev))
		}
		tl.received++
		inResend = false
		prev = r.seq
	}
	for s := first; s <= last; s++ {
		if seen[s] == 0 {
			tl.missing = append(tl.missing, s)
		}
	}
	return tl
}

func (tl tally) String() string {
	return fmt.Sprintf("sent %d, received %d, duplicated %d (in %d resends), lost %d (in %d loss records), missing %d",
		tl.sent, tl.received, tl.duplicated, len(tl.resends), tl.lost, tl.lossRecords, len(tl.missing))
}

// newServer serves h on loopback and returns its URL.
func newServer(t testing.TB, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}
