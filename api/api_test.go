// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/journal/journaltest"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./api -update rewrites it):\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// testCache is a pod cache with two pods, one of them failing inspection.
func testCache() *podcache.Cache {
	c := podcache.New()
	ns := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	web := &runtime.PodStatus{UID: "uid-web", Name: "web", Namespace: "shop", IPs: []string{"10.244.0.7", "fd00::7"},
		Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: "sb-web", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: ns(-time.Hour),
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "uid-web", Namespace: "shop"}}},
		Containers: []*runtimeapi.ContainerStatus{
			{Id: "c-nginx-1", Metadata: &runtimeapi.ContainerMetadata{Name: "nginx", Attempt: 1}, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
				CreatedAt: ns(-time.Minute), StartedAt: ns(-time.Minute + time.Second), Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"},
				Annotations: map[string]string{runtime.ContainerRestartCountAnnotation: "1"}},
			{Id: "c-nginx-0", Metadata: &runtimeapi.ContainerMetadata{Name: "nginx"}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
				CreatedAt: ns(-time.Hour), StartedAt: ns(-time.Hour + time.Second), FinishedAt: ns(-time.Minute - time.Second),
				ExitCode: 137, Reason: "OOMKilled", Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"},
				Annotations: map[string]string{runtime.ContainerRestartCountAnnotation: "0"}},
		},
	}
	c.Set("uid-web", web, nil, t0)
	c.Set("uid-db", &runtime.PodStatus{UID: "uid-db", Name: "db", Namespace: "shop"}, errors.New("status of container c-db: rpc error: code = DeadlineExceeded"), t0.Add(-time.Second))
	c.UpdateTime(t0)
	return c
}

type healthy struct {
	ok  bool
	err error
}

func (h *healthy) check() (bool, error) { return h.ok, h.err }

type fixture struct {
	srv     *Server
	ts      *httptest.Server
	journal *journal.Journal
	health  *healthy
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{health: &healthy{ok: true}}
	if opts.Journal == nil {
		opts.Journal = journaltest.Memory(100, 1000)
	}
	if opts.Cache == nil {
		opts.Cache = testCache()
	}
	opts.Checks = []pleg.HealthCheck{{Name: "PLEG", Healthy: f.health.check}}
	f.journal = opts.Journal.(*journal.Journal)
	f.srv = NewServer(opts)
	f.ts = httptest.NewServer(f.srv)
	t.Cleanup(func() {
		f.srv.Close()
		f.ts.Close()
	})
	return f
}

// reply is what a test reads of an answer whose body get has read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

func replyOf(resp *http.Response) reply { return reply{resp.StatusCode, resp.Header} }

func (f *fixture) get(t *testing.T, path string, header ...string) (reply, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.ts.URL+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return replyOf(resp), body
}

func TestHealthz(t *testing.T) {
	f := newFixture(t, Options{})
	resp, body := f.get(t, "/healthz")
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Errorf("healthy: %d %q", resp.StatusCode, body)
	}
	f.health.ok, f.health.err = false, errors.New("pleg was last seen active 3m5s ago; threshold is 3m0s")
	resp, body = f.get(t, "/healthz")
	if want := "PLEG is not healthy: pleg was last seen active 3m5s ago; threshold is 3m0s\n"; resp.StatusCode != 500 || string(body) != want {
		t.Errorf("unhealthy: %d %q, want 500 %q", resp.StatusCode, body, want)
	}
}

func TestPods(t *testing.T) {
	f := newFixture(t, Options{})
	resp, body := f.get(t, "/v1/pods")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/pods: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	golden(t, "pods.json", body)

	resp, body = f.get(t, "/v1/pods/uid-web")
	var p Pod
	if err := json.Unmarshal(body, &p); resp.StatusCode != 200 || err != nil || p.Name != "web" || len(p.Containers) != 2 {
		t.Errorf("GET /v1/pods/uid-web: %d %v %+v", resp.StatusCode, err, p)
	}

	resp, body = f.get(t, "/v1/pods/nope")
	assertError(t, resp, body, 404, `no pod "nope"`)
	resp, body = f.get(t, "/v1/pods?namespace=shop")
	assertError(t, resp, body, 400, "takes no query parameters")
	resp, body = f.get(t, "/v2/pods")
	assertError(t, resp, body, 404, "no such path")
}

func TestPodsBeforeFirstRelist(t *testing.T) {
	f := newFixture(t, Options{Cache: podcache.New()})
	_, body := f.get(t, "/v1/pods")
	if want := "{\n  \"globalTimestamp\": null,\n  \"pods\": []\n}\n"; string(body) != want {
		t.Errorf("empty cache: %s, want %s", body, want)
	}
}

func assertError(t *testing.T, resp reply, body []byte, code int, substr string) {
	t.Helper()
	var e Error
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != code || !strings.Contains(e.Error, substr) {
		t.Errorf("got %d %s, want %d with a JSON error saying %q", resp.StatusCode, body, code, substr)
	}
}

// event is a pleg event of pod p, container c.
func event(typ pleg.EventType, pod, ns, container string) pleg.Event {
	return pleg.Event{Type: typ, PodUID: "uid-" + pod, PodName: pod, PodNamespace: ns, ContainerID: "id-" + container, ContainerName: container, Observed: t0}
}

// stream opens /v1/events and returns a reader of its lines.
// stream opens /v1/events; the test's cleanup closes the body.
func (f *fixture) stream(t *testing.T, query string, header ...string) (reply, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+"/v1/events"+query, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return replyOf(resp), bufio.NewReader(resp.Body)
}

// next reads the next event line of an NDJSON stream.
func next(t *testing.T, r *bufio.Reader) Event {
	t.Helper()
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // keep-alive
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		return ev
	}
}

func TestEventsLiveWithFilters(t *testing.T) {
	f := newFixture(t, Options{})
	journaltest.Append(f.journal, event(pleg.ContainerStarted, "old", "shop", "x")) // before the client came
	for _, tc := range []struct {
		query string
		want  []string // container names, in order
	}{
		{"", []string{"a", "b", "c", "d"}},
		{"?pod=web", []string{"a", "c"}},
		{"?pod=uid-db&pod=web", []string{"a", "b", "c"}},
		{"?namespace=kube-system", []string{"d"}},
		{"?type=ContainerDied", []string{"c"}},
		{"?type=ContainerDied&type=ContainerStarted&namespace=shop", []string{"a", "b", "c"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			resp, r := f.stream(t, tc.query)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			start := f.journal.Last()
			journaltest.Append(f.journal, event(pleg.ContainerStarted, "web", "shop", "a"))
			journaltest.Append(f.journal, event(pleg.ContainerStarted, "db", "shop", "b"))
			journaltest.Append(f.journal, event(pleg.ContainerDied, "web", "shop", "c"))
			journaltest.Append(f.journal, event(pleg.ContainerStarted, "dns", "kube-system", "d"))
			var got []string
			for range tc.want {
				ev := next(t, r)
				if ev.Seq <= start {
					t.Fatalf("got old event %+v", ev)
				}
				got = append(got, ev.ContainerName)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEventsLineFormat(t *testing.T) {
	f := newFixture(t, Options{})
	attempt, exit := uint32(0), int32(137)
	journaltest.Append(f.journal, pleg.Event{Type: pleg.ContainerDied, PodUID: "u1", PodName: "web", PodNamespace: "shop",
		ContainerID: "c1", ContainerName: "nginx", Observed: time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC),
		FinishedAt: time.Date(2026, 11, 21, 9, 59, 59, 987000000, time.UTC), Image: "nginx:1.27", Attempt: &attempt,
		ExitCode: &exit, Reason: "OOMKilled"})
	journaltest.Append(f.journal, pleg.Event{Type: pleg.PodSync, PodUID: "u1", PodName: "web", PodNamespace: "shop", Observed: t0})
	_, r := f.stream(t, "?since=999")
	var lines bytes.Buffer
	for range 2 {
		line, _ := r.ReadBytes('\n')
		lines.Write(line)
	}
	golden(t, "events.ndjson", lines.Bytes())

	_, sse := f.stream(t, "", "Accept", "text/event-stream", "Last-Event-ID", "999")
	var frames bytes.Buffer
	for range 6 { // two events of three lines each
		line, _ := sse.ReadString('\n')
		frames.WriteString(line)
	}
	golden(t, "events.sse", frames.Bytes())
}

func TestEventsResumeWithoutDuplicatesOrHoles(t *testing.T) {
	f := newFixture(t, Options{})
	for i := range 10 {
		journaltest.Append(f.journal, event(pleg.ContainerStarted, "web", "shop", fmt.Sprint(i)))
	}
	// A client read up to 1004, then came back.
	_, r := f.stream(t, "?since=1004")
	for want := uint64(1005); want <= 1009; want++ {
		if ev := next(t, r); ev.Seq != want {
			t.Fatalf("resumed at %d, want %d", ev.Seq, want)
		}
	}
	// The same with SSE's Last-Event-ID.
	_, sse := f.stream(t, "", "Accept", "text/event-stream", "Last-Event-ID", "1007")
	id, _ := sse.ReadString('\n')
	if id != "id: 1008\n" {
		t.Errorf("SSE resumed with %q, want id: 1008", id)
	}
}

func TestEventsGapWhenTheRingMovedOn(t *testing.T) {
	f := newFixture(t, Options{Journal: journaltest.Memory(4, 1000)})
	for i := range 10 { // 1000..1009; the ring keeps 1006..1009
		journaltest.Append(f.journal, event(pleg.ContainerStarted, "web", "shop", fmt.Sprint(i)))
	}
	_, r := f.stream(t, "?since=1001&type=ContainerDied")
	gap := next(t, r)
	if gap.Type != TypeGap || gap.From != 1002 || gap.To != 1005 || gap.Seq != 1005 {
		t.Errorf("got %+v, want a Gap of 1002..1005 that passes the type filter", gap)
	}
	// since=0 asks for everything held: the evicted start is a gap too.
	_, r = f.stream(t, "?since=0")
	if gap := next(t, r); gap.Type != TypeGap || gap.From != 1000 || gap.To != 1005 {
		t.Errorf("since=0 got %+v, want a Gap of 1000..1005", gap)
	}
	if ev := next(t, r); ev.Seq != 1006 {
		t.Errorf("after the gap got %d, want 1006", ev.Seq)
	}
}

func TestEventsBadQueries(t *testing.T) {
	f := newFixture(t, Options{})
	journaltest.Append(f.journal, event(pleg.ContainerStarted, "web", "shop", "a")) // 1000
	for _, tc := range []struct {
		query, header, want string
	}{
		{query: "?since=abc", want: `since "abc" is not a sequence number`},
		{query: "?since=-1", want: "not a sequence number"},
		{header: "x1", want: `since "x1" is not a sequence number`},
		{query: "?since=%zz", want: "does not parse"},
		{query: "?pod=web&%zz", want: "does not parse"},
		{query: "?since=1&since=2", want: "since given more than once"},
		{query: "?" + strings.Repeat("pod=p&", 100) + strings.Repeat("namespace=n&", 29), want: "129 filter values, more than the 128 a query may have"},
		{query: "?type=ContainerExploded", want: `unknown event type "ContainerExploded"`},
		{query: "?container=a", want: `unknown query parameter "container"`},
		{query: "?pod=", want: "empty pod or namespace filter"},
	} {
		resp, body := f.get(t, "/v1/events"+tc.query, "Last-Event-ID", tc.header)
		assertError(t, resp, body, 400, tc.want)
	}
}

func TestEventStreamCap(t *testing.T) {
	f := newFixture(t, Options{MaxStreams: 2})
	for range 2 {
		if resp, _ := f.stream(t, ""); resp.StatusCode != 200 {
			t.Fatalf("stream refused: %d", resp.StatusCode)
		}
	}
	resp, body := f.get(t, "/v1/events")
	assertError(t, resp, body, 429, "2 event streams are open")
}

// TestClientThatNeverReads: the journal (and so the generator) never
// waits for it, other clients get everything, and the server cuts it once
// a write stalls past the write timeout, freeing its stream slot.
func TestClientThatNeverReads(t *testing.T) {
	f := newFixture(t, Options{MaxStreams: 2, WriteTimeout: 3 * time.Second, Journal: journaltest.Memory(1<<16, 1)})
	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_, _ = fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
	for len(f.srv.streams) < 1 { // the stalled stream holds its slot
		time.Sleep(time.Millisecond)
	}
	_, good := f.stream(t, "")

	const n = 50_000
	// The journal keeps some 250 of these events: the appends keep within
	// window of the good client, as a generator does of a client that
	// keeps up, or it would rightly get a Gap on a loaded machine.
	const window = 64
	big := strings.Repeat("x", 200)
	var progress atomic.Int64 // events the good client read
	read := make(chan error, 1)
	go func() {
		for i := 0; i < n; {
			line, err := good.ReadBytes('\n')
			if err == nil && len(bytes.TrimSpace(line)) == 0 {
				// A keep-alive: the stream was idle for KeepAlive, as a
				// loaded machine can leave it between two appends.
				continue
			}
			var ev Event
			if err == nil {
				err = json.Unmarshal(line, &ev)
			}
			if err == nil && ev.ContainerID != fmt.Sprint(i) {
				err = fmt.Errorf("got %s at %d", ev.ContainerID, i)
			}
			if err != nil {
				read <- err
				return
			}
			progress.Add(1)
			i++
		}
		read <- nil
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			for int64(i)-progress.Load() >= window {
				time.Sleep(100 * time.Microsecond)
			}
			journaltest.Append(f.journal, pleg.Event{Type: pleg.ContainerStarted, PodUID: big, ContainerID: fmt.Sprint(i)})
		}
	}()
	// Appends blocked behind the client that does not read would stop the
	// good client too: a minute without progress says so.
	for last, lastAt := int64(-1), time.Now(); ; {
		var err error
		select {
		case err = <-read:
		case <-time.After(100 * time.Millisecond):
			if p := progress.Load(); p != last {
				last, lastAt = p, time.Now()
			} else if time.Since(lastAt) > time.Minute {
				t.Fatalf("no event read for a minute, %d of %d: appending blocked behind a client that does not read", p, n)
			}
			continue
		}
		if err != nil {
			t.Fatalf("the reading client: %v", err)
		}
		break
	}
	<-done
	// The stalled stream is cut: its slot comes free for a new client.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, _ := f.stream(t, "")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream of the client that never reads was never cut")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCloseEndsStreams(t *testing.T) {
	f := newFixture(t, Options{})
	_, r := f.stream(t, "")
	f.srv.Close()
	if _, err := io.ReadAll(r); err != nil {
		t.Errorf("stream ended with %v, want a clean end", err)
	}
}

func TestWritePodListMatchesNewPodList(t *testing.T) {
	c := testCache()
	var streamed, whole bytes.Buffer
	if err := WritePodList(&streamed, c.GetAll(), c.GlobalTime()); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&whole)
	enc.SetIndent("", "  ")
	if err := enc.Encode(NewPodList(c.GetAll(), c.GlobalTime())); err != nil {
		t.Fatal(err)
	}
	if streamed.String() != whole.String() {
		t.Errorf("streamed:\n%s\nwhole:\n%s", streamed.String(), whole.String())
	}
}

func TestHealthzVerboseAndMode(t *testing.T) {
	f := &fixture{health: &healthy{ok: true}}
	srv := NewServer(Options{
		Cache: testCache(), Journal: journaltest.Memory(10, 1),
		Checks:  []pleg.HealthCheck{{Name: "PLEG", Healthy: f.health.check}},
		Mode:    func() (string, string) { return "evented", "mode auto: evented since 10:00" },
		Details: func() []string { return []string{"runtime: event stream: supported"} },
	})
	f.srv, f.ts = srv, httptest.NewServer(srv)
	defer f.ts.Close()

	resp, body := f.get(t, "/healthz")
	if resp.Header.Get("X-Pleg-Mode") != "evented" || string(body) != "ok\n" {
		t.Errorf("healthz: %q, X-Pleg-Mode %q", body, resp.Header.Get("X-Pleg-Mode"))
	}
	_, body = f.get(t, "/healthz?verbose")
	if want := "[+]PLEG ok\nmode auto: evented since 10:00\nruntime: event stream: supported\nhealthz check passed\n"; string(body) != want {
		t.Errorf("verbose healthz:\n%s\nwant:\n%s", body, want)
	}
	f.health.ok, f.health.err = false, errors.New("pleg was last seen active 11m0s ago; threshold is 10m0s")
	resp, body = f.get(t, "/healthz?verbose")
	if want := "[-]PLEG failed: pleg was last seen active 11m0s ago; threshold is 10m0s\nmode auto: evented since 10:00\nruntime: event stream: supported\nhealthz check failed\n"; resp.StatusCode != 500 || string(body) != want {
		t.Errorf("verbose healthz unhealthy: %d\n%s\nwant:\n%s", resp.StatusCode, body, want)
	}
	resp, body = f.get(t, "/healthz?verbos")
	assertError(t, resp, body, 400, `unknown query parameter "verbos"`)
}

// An exit code of 0 is told as 0; one the runtime did not report is not
// told at all.
func TestEventExitCodeZeroIsNotUnknown(t *testing.T) {
	zero := int32(0)
	for _, tc := range []struct {
		ev   pleg.Event
		want string
	}{
		{pleg.Event{Type: pleg.ContainerDied, ExitCode: &zero, Reason: "Completed"}, `"exitCode":0,"reason":"Completed"`},
		{pleg.Event{Type: pleg.ContainerDied}, `"type":"ContainerDied"}`},
	} {
		data, err := json.Marshal(NewEvent(1, tc.ev))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), tc.want) {
			t.Errorf("%s: want %s in it", data, tc.want)
		}
	}
}
