// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal/journaltest"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
)

// waitFor polls cond until it holds; the deadline only bounds a test that
// would otherwise hang, it is never what the test measures.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// smallBuffers makes the server's side of every connection buffer little,
// so that a client that does not read blocks the server's writes after
// kilobytes instead of the megabytes the kernel would otherwise take.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// inFlight counts the requests a handler is serving.
type inFlight struct {
	h http.Handler
	n atomic.Int64
}

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.n.Add(1)
	defer f.n.Add(-1)
	f.h.ServeHTTP(w, r)
}

// startServer serves srv over a listener with small buffers, counting the
// requests in flight.
func startServer(t *testing.T, srv *Server) (*httptest.Server, *inFlight) {
	t.Helper()
	counted := &inFlight{h: srv}
	ts := httptest.NewUnstartedServer(counted)
	ts.Listener = smallBuffers{ts.Listener}
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return ts, counted
}

// neverReads sends a GET for path from the address local (127.0.0.x) and
// never reads the answer: its receive buffer is small, so the server's
// writes stall once both buffers are full.
func neverReads(t *testing.T, server, local, path string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", server)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return c
}

// bigCache holds pods whose statuses make a /v1/pods answer of about
// size bytes.
func bigCache(size int) *podcache.Cache {
	c := podcache.New()
	msg := strings.Repeat("m", 64<<10)
	for i := range size / len(msg) {
		uid := fmt.Sprintf("uid-%d", i)
		c.Set(uid, &runtime.PodStatus{UID: uid, Name: uid, Namespace: "ns", Containers: []*runtimeapi.ContainerStatus{{
			Id: "c", Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, State: runtimeapi.ContainerState_CONTAINER_EXITED, Message: msg,
		}}}, nil, t0)
	}
	c.UpdateTime(t0)
	return c
}

// Issue 11 measured 40 stalled /v1/pods readers all held after 65 s: each
// answer now has the streams' write deadline, so every one of them is cut
// and its handler returns, while a client that reads gets the whole list.
func TestStalledPodsReadersAreCut(t *testing.T) {
	// The whole answer's deadline is another test's: here, on a busy
	// machine under the race detector, the reading client may take more
	// than the default 30 s and must not be cut for it.
	srv := NewServer(Options{Cache: bigCache(4 << 20), Journal: journaltest.Memory(10, 1), WriteTimeout: 3 * time.Second,
		PodsTimeout: time.Hour})
	ts, counted := startServer(t, srv)
	const stalled = 40
	for range stalled {
		neverReads(t, ts.Listener.Addr().String(), "127.0.0.2", "/v1/pods")
	}
	waitFor(t, "the stalled answers to start", func() bool { return counted.n.Load() == stalled })

	resp, err := http.Get(ts.URL + "/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(body) < 4<<20 || !strings.HasSuffix(string(body), "]\n}\n") {
		t.Errorf("a reading client got %d bytes, %v; want the whole list", len(body), err)
	}
	waitFor(t, "every stalled /v1/pods answer cut", func() bool { return counted.n.Load() == 0 })
}

// trickles sends a GET for path and reads its answer a KiB at a time,
// every period, often enough that no write waits for the write timeout,
// until the answer ends or stop closes. It reports how much it read.
func trickles(t testing.TB, server, path string, period time.Duration, stop <-chan struct{}) <-chan int {
	t.Helper()
	c, err := net.Dial("tcp", server)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	read := make(chan int, 1)
	go func() {
		defer func() { _ = c.Close() }()
		buf := make([]byte, 1<<10)
		total := 0
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			n, err := c.Read(buf)
			total += n
			if err != nil {
				read <- total
				return
			}
			select {
			case <-stop:
				read <- total
				return
			case <-tick.C:
			}
		}
	}()
	return read
}

// Issue 22 found that /v1/pods renewed its write deadline with every
// write, so a client reading a trickle held its answer, and the snapshot
// of the cache under it, for as long as it liked. The answer now ends at
// its own deadline however the client reads.
func TestTricklingPodsReaderIsCut(t *testing.T) {
	srv := NewServer(Options{Cache: bigCache(4 << 20), Journal: journaltest.Memory(10, 1), PodsTimeout: time.Second})
	ts, counted := startServer(t, srv)
	stop := make(chan struct{})
	defer close(stop)
	// A KiB every 50 ms: the whole list would take over three minutes,
	// and no write waits anywhere near the 10 s write timeout.
	read := trickles(t, ts.Listener.Addr().String(), "/v1/pods", 50*time.Millisecond, stop)
	waitFor(t, "the answer to start", func() bool { return counted.n.Load() == 1 })
	waitFor(t, "the trickled answer cut at its deadline", func() bool { return counted.n.Load() == 0 })
	if n := <-read; n >= 4<<20 {
		t.Errorf("the trickling client read %d bytes, the whole list", n)
	}
}

// Every answer has a write deadline, /metrics's included: a scraper that
// stops reading does not hold its handler and the encoded metrics.
func TestStalledMetricsReaderIsCut(t *testing.T) {
	reg := prometheus.NewRegistry()
	big := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_series", Help: "Many series."}, []string{"n"})
	reg.MustRegister(big)
	for i := range 20000 {
		big.WithLabelValues(strconv.Itoa(i)).Set(float64(i))
	}
	srv := NewServer(Options{Cache: testCache(), Journal: journaltest.Memory(10, 1), Gatherer: reg, WriteTimeout: time.Second})
	ts, counted := startServer(t, srv)
	neverReads(t, ts.Listener.Addr().String(), "127.0.0.2", "/metrics")
	waitFor(t, "the answer to start", func() bool { return counted.n.Load() == 1 })
	waitFor(t, "the stalled /metrics answer cut", func() bool { return counted.n.Load() == 0 })
}

// Issue 11 measured 64 clients that never read, on a filter that matches
// nothing, holding every stream slot for 75 s. One client now holds at
// most MaxStreamsPerClient of them, others still get streams, and a
// stream that sends no event is ended after StreamIdleTimeout without the
// client doing anything.
func TestNeverReadingClientsCannotHoldEveryStream(t *testing.T) {
	j := journaltest.Memory(100, 1)
	srv := NewServer(Options{Cache: testCache(), Journal: j, MaxStreams: 64, MaxStreamsPerClient: 16,
		StreamIdleTimeout: 2 * time.Second, KeepAlive: 50 * time.Millisecond})
	ts, counted := startServer(t, srv)
	for range 64 {
		neverReads(t, ts.Listener.Addr().String(), "127.0.0.2", "/v1/events?pod=nothing-matches")
	}
	// The 48 refused get their 429 and are done; 16 streams stay.
	waitFor(t, "the 16 streams of the client that never reads", func() bool {
		return counted.n.Load() == 16 && srv.openStreams("127.0.0.2") == 16
	})

	// Another client is served, and sees events.
	resp, err := http.Get(ts.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("another client got %d", resp.StatusCode)
	}
	journaltest.Append(j, event(pleg.ContainerStarted, "web", "shop", "a"))
	if ev := next(t, bufio.NewReader(resp.Body)); ev.ContainerName != "a" {
		t.Errorf("another client got %+v", ev)
	}

	// The idle streams end by themselves, keep-alives notwithstanding.
	waitFor(t, "the idle streams of the client that never reads ended", func() bool {
		return srv.openStreams("127.0.0.2") == 0
	})
}

// openStreams is how many streams client holds.
func (s *Server) openStreams(client string) int {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	return s.clients[client]
}

func TestStreamsPerClient(t *testing.T) {
	f := newFixture(t, Options{MaxStreams: 3, MaxStreamsPerClient: 2})
	for range 2 {
		if resp, _ := f.stream(t, ""); resp.StatusCode != 200 {
			t.Fatalf("stream refused: %d", resp.StatusCode)
		}
	}
	resp, body := f.get(t, "/v1/events")
	assertError(t, resp, body, 429, "2 event streams are open from 127.0.0.1, the most one client may have")

	// Another address is another client; then the server's cap holds.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	other := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+"/v1/events", nil)
	third, err := other.Do(req)
	if err != nil || third.StatusCode != 200 {
		t.Fatalf("a stream from another address: %v %v", third, err)
	}
	defer third.Body.Close()
	req, _ = http.NewRequestWithContext(ctx, "GET", f.ts.URL+"/v1/events", nil)
	fourth, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(fourth.Body)
	fourth.Body.Close()
	assertError(t, replyOf(fourth), body, 429, "3 event streams are open, the most this server serves")
	if n := f.srv.openStreams("127.0.0.3"); n != 1 {
		t.Errorf("a refused stream still counts for its client: %d open", n)
	}
}

// A stream replaying a long backlog ends at Close between two batches,
// instead of writing the whole backlog first.
func TestCloseEndsABacklogReplay(t *testing.T) {
	j := journaltest.Memory(100_000, 1)
	big := strings.Repeat("x", 200)
	for i := range 100_000 {
		journaltest.Append(j, pleg.Event{Type: pleg.ContainerStarted, PodUID: big, ContainerID: fmt.Sprint(i)})
	}
	srv := NewServer(Options{Cache: testCache(), Journal: j})
	ts, counted := startServer(t, srv)
	c := neverReads(t, ts.Listener.Addr().String(), "127.0.0.1", "/v1/events?since=0")
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil { // the status line: the replay runs
		t.Fatal(err)
	}
	srv.Close()
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		if strings.Contains(line, `"type":"ContainerStarted"`) {
			n++
		}
	}
	if n >= 100_000 {
		t.Errorf("the stream sent all %d events of the backlog after Close", n)
	}
	waitFor(t, "the stream's handler to return", func() bool { return counted.n.Load() == 0 })
}

// A client whose number comes from a run whose clock was ahead (the clock
// stepped back across a restart) gets a Gap and everything the ring
// holds, not a 400.
func TestResumeFromARunWhoseClockWasAhead(t *testing.T) {
	f := newFixture(t, Options{Journal: journaltest.Memory(100, 1000)})
	for _, c := range []string{"a", "b"} {
		journaltest.Append(f.journal, event(pleg.ContainerStarted, "web", "shop", c))
	}
	for _, h := range [][]string{nil, {"Last-Event-ID", "5000"}} {
		query := "?since=5000"
		if h != nil {
			query = ""
		}
		_, r := f.stream(t, query, h...)
		gap := next(t, r)
		if gap.Type != TypeGap || gap.From != 5001 || gap.To != 999 || gap.Seq != 999 {
			t.Errorf("got %+v, want a Gap from 5001 to 999", gap)
		}
		for _, want := range []uint64{1000, 1001} {
			if ev := next(t, r); ev.Seq != want {
				t.Errorf("after the gap got %d, want %d", ev.Seq, want)
			}
		}
	}
}

func TestMethodsAndHeaders(t *testing.T) {
	f := newFixture(t, Options{})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"POST", "/healthz", 405},
		{"DELETE", "/v1/pods/uid-web", 405},
		{"PUT", "/v1/events", 405},
		{"POST", "/nope", 404},
		{"GET", "/v1/pods/", 404},
		{"HEAD", "/healthz", 200},
	} {
		req, _ := http.NewRequest(tc.method, f.ts.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, resp.StatusCode, body, tc.code)
		}
		if tc.code == 405 {
			assertError(t, replyOf(resp), body, 405, "only GET and HEAD")
			if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q", tc.method, tc.path, allow)
			}
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q", tc.method, tc.path, got)
		}
	}
	resp, body := f.get(t, "/healthz?%zz")
	assertError(t, resp, body, 400, "does not parse")
}

func TestReadyzAndLivez(t *testing.T) {
	ready := &healthy{err: fmt.Errorf("the first relist has not ended yet")}
	f := newFixture(t, Options{Ready: ready.check})
	get := func(path string) string {
		resp, body := f.get(t, path)
		return fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{"/readyz", "500 first-relist is not ready: the first relist has not ended yet\n"},
		{"/readyz?verbose", "500 [-]first-relist failed: the first relist has not ended yet\n[+]server ok\nreadyz check failed\n"},
		{"/healthz", "200 ok\n"},
		{"/livez", "200 ok\n"},
	} {
		if got := get(tc.path); got != tc.want {
			t.Errorf("before the first relist, %s = %q, want %q", tc.path, got, tc.want)
		}
	}
	ready.ok, ready.err = true, nil
	if got := get("/readyz"); got != "200 ok\n" {
		t.Errorf("ready: %q", got)
	}
	// Readiness is "pleg serves", not "the runtime is healthy": a sick
	// runtime fails /healthz alone.
	f.health.ok, f.health.err = false, fmt.Errorf("pleg was last seen active 3m5s ago; threshold is 3m0s")
	for path, want := range map[string]string{
		"/readyz":         "200 ok\n",
		"/readyz?verbose": "200 [+]first-relist ok\n[+]server ok\nreadyz check passed\n",
		"/healthz":        "500 PLEG is not healthy: pleg was last seen active 3m5s ago; threshold is 3m0s\n",
		"/livez":          "200 ok\n",
	} {
		if got := get(path); got != want {
			t.Errorf("unhealthy: %s = %q, want %q", path, got, want)
		}
	}
	f.srv.Close()
	if got, want := get("/readyz"), "500 server is not ready: shutting down\n"; got != want {
		t.Errorf("closing: /readyz = %q, want %q", got, want)
	}
	if got := get("/livez?verbose"); got != "200 [+]ping ok\nlivez check passed\n" {
		t.Errorf("closing: /livez?verbose = %q", got)
	}
}

// Probes serves what may face a network, and nothing of the pods.
func TestProbes(t *testing.T) {
	srv := NewServer(Options{Cache: testCache(), Journal: journaltest.Memory(10, 1), Gatherer: prometheus.NewRegistry()})
	ts := httptest.NewServer(srv.Probes())
	defer ts.Close()
	for path, code := range map[string]int{"/healthz": 200, "/readyz": 200, "/livez": 200, "/metrics": 200, "/v1/pods": 404, "/v1/events": 404, "/debug/pprof/": 404} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("probes %s: %d, want %d", path, resp.StatusCode, code)
		}
		if code == 404 {
			assertError(t, replyOf(resp), body, 404, "try /healthz, /readyz, /livez, /metrics)")
		}
	}
}

func TestMatcher(t *testing.T) {
	ev := Event{Type: "ContainerDied", PodUID: "u1", PodName: "web", PodNamespace: "shop"}
	gap := Event{Type: TypeGap}
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Pods: []string{"u1"}}, true},
		{Filter{Pods: []string{"web"}}, true},
		{Filter{Pods: []string{"db", "web"}, Namespaces: []string{"shop"}}, true},
		{Filter{Pods: []string{"db"}}, false},
		{Filter{Namespaces: []string{"kube-system"}}, false},
		{Filter{Types: []string{"ContainerStarted"}}, false},
		{Filter{Types: []string{"ContainerStarted", "ContainerDied"}}, true},
	} {
		if got := tc.f.Matcher().Match(&ev); got != tc.want || tc.f.Match(&ev) != tc.want {
			t.Errorf("%+v matches %+v: %v, want %v", tc.f, ev, got, tc.want)
		}
		if !tc.f.Match(&gap) {
			t.Errorf("%+v hides a gap", tc.f)
		}
	}
}

// BenchmarkSlowPodsReaders measures the memory that 100 clients reading
// /v1/pods a KiB every 200 ms hold, on a node of 1,000 pods whose every
// status changes between each ten of them (each answer holds its own
// snapshot of the cache): after 2 s, under the per-write deadline alone
// (as before issue 22: a PodsTimeout no answer reaches) and with a total
// deadline of 1 s. Run it with -benchtime 1x; "MB-held" is the live heap
// the readers keep, "answers-open" how many handlers still run.
func BenchmarkSlowPodsReaders(b *testing.B) {
	for _, bc := range []struct {
		name    string
		timeout time.Duration
	}{{"per-write-deadline", time.Hour}, {"total-deadline-1s", time.Second}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				held, open := slowPodsReaders(b, bc.timeout)
				b.ReportMetric(held/(1<<20), "MB-held")
				b.ReportMetric(float64(open), "answers-open")
			}
		})
	}
}

// slowPodsReaders runs the scenario of BenchmarkSlowPodsReaders and
// returns the live heap the readers hold after 2 s and the answers then
// still open.
func slowPodsReaders(b *testing.B, podsTimeout time.Duration) (held float64, open int64) {
	const readers, pods, churnEvery = 100, 1000, 10
	cache := podcache.New()
	generation := 0
	churn := func() {
		generation++
		for i := range pods {
			uid := fmt.Sprintf("uid-%04d", i)
			cache.Set(uid, benchPodStatus(uid, generation), nil, t0.Add(time.Duration(generation)*time.Second))
		}
		cache.UpdateTime(t0.Add(time.Duration(generation) * time.Second))
	}
	churn()
	srv := NewServer(Options{Cache: cache, Journal: journaltest.Memory(10, 1), PodsTimeout: podsTimeout})
	counted := &inFlight{h: srv}
	ts := httptest.NewUnstartedServer(counted)
	ts.Listener = smallBuffers{ts.Listener}
	ts.Start()
	defer ts.Close()
	defer srv.Close()

	stop := make(chan struct{})
	var done []<-chan int
	start := time.Now()
	for i := range readers {
		done = append(done, trickles(b, ts.Listener.Addr().String(), "/v1/pods", 200*time.Millisecond, stop))
		waitFor(b, "the answer to start", func() bool { return counted.n.Load() == int64(i+1) || time.Since(start) > podsTimeout })
		if (i+1)%churnEvery == 0 {
			churn()
		}
	}
	time.Sleep(time.Until(start.Add(2 * time.Second)))
	holding := liveHeap()
	open = counted.n.Load()
	close(stop)
	for _, d := range done {
		<-d
	}
	waitFor(b, "every answer to end", func() bool { return counted.n.Load() == 0 })
	return float64(holding) - float64(liveHeap()), open
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// benchPodStatus is a pod of three containers, as the kubelet names them,
// at a generation of its status.
func benchPodStatus(uid string, generation int) *runtime.PodStatus {
	id := func(n int) string { return fmt.Sprintf("%064x", generation*10+n) }
	st := &runtime.PodStatus{UID: uid, Name: "web-" + uid, Namespace: "shop", IPs: []string{"10.244.0.7"},
		Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: id(0), State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web-" + uid, Uid: uid, Namespace: "shop"}}}}
	for n := 1; n <= 3; n++ {
		st.Containers = append(st.Containers, &runtimeapi.ContainerStatus{Id: id(n),
			Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", n), Attempt: uint32(generation)},
			State:    runtimeapi.ContainerState_CONTAINER_RUNNING, Image: &runtimeapi.ImageSpec{Image: "registry.example/shop/web:1.27"},
			Message: strings.Repeat("m", 512)})
	}
	return st
}
