// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/journal/journaltest"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
)

func TestParseServer(t *testing.T) {
	for _, tc := range []struct {
		server, base, socket, err string
	}{
		{server: "http://127.0.0.1:9847", base: "http://127.0.0.1:9847"},
		{server: "https://node-1:9847/pleg/", base: "https://node-1:9847/pleg"},
		{server: "unix:///run/pleg.sock", base: "http://pleg", socket: "/run/pleg.sock"},
		{server: "ftp://x", err: `scheme "ftp" is not served: want http://host:port, https://host:port or unix:///path`},
		{server: "127.0.0.1:9847", err: "has no scheme"},
		{server: "localhost:9847", err: "has no scheme"},
		{server: "unix://run/pleg.sock", err: "want unix:///absolute/path"},
		{server: "http://", err: "has no host"},
		{server: "http://user:secret@host:1", err: "basic-auth options"},
		{server: "http://host:1/?since=3", err: "no query"},
	} {
		t.Run(tc.server, func(t *testing.T) {
			base, socket, err := ParseServer(tc.server)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || base.String() != tc.base || socket != tc.socket {
				t.Fatalf("ParseServer = %v, %q, %v; want %s, %q", base, socket, err, tc.base, tc.socket)
			}
		})
	}
}

func TestNewRefusesOptionsTheServerCannotHonour(t *testing.T) {
	for _, tc := range []struct {
		server string
		opts   Options
		err    string
	}{
		{"http://node:9847", Options{CAFile: "/ca.pem"}, "TLS settings need an https:// server"},
		{"unix:///run/pleg.sock", Options{CertFile: "c.pem", KeyFile: "k.pem"}, "TLS settings need an https:// server"},
		{"https://node:9847", Options{CertFile: "c.pem"}, "both its certificate and its key"},
		{"http://node:9847", Options{Username: "u", Password: "p"}, "in the clear"},
		{"https://node:9847", Options{Password: "p"}, "without a user name"},
		{"https://node:9847", Options{Username: "u", Password: "p", PasswordFile: "f"}, "choose one"},
		{"https://node:9847", Options{CAFile: "/nonexistent/ca.pem"}, "no such file"},
		{"https://node:9847", Options{Timeout: -time.Second}, "timeout -1s must be positive"},
	} {
		if _, err := New(tc.server, tc.opts); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("New(%s, %+v) = %v, want an error saying %q", tc.server, tc.opts, err, tc.err)
		}
	}
	// Credentials over the loopback or a socket stay on the node.
	for _, server := range []string{"http://127.0.0.1:9847", "http://localhost:9847", "http://[::1]:9847", "unix:///run/pleg.sock"} {
		if _, err := New(server, Options{Username: "u", Password: "p"}); err != nil {
			t.Errorf("New(%s) with basic auth: %v", server, err)
		}
	}
}

// daemon is a real API server over a journal and a cache that the test
// feeds.
type daemon struct {
	journal *journal.Journal
	cache   *podcache.Cache
	handler http.Handler
}

func newDaemon(t *testing.T, first uint64) *daemon {
	t.Helper()
	reg := prometheus.NewRegistry()
	if _, err := pleg.New(nilRuntime{}, pleg.Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	d := &daemon{journal: journaltest.Memory(100, first), cache: podcache.New()}
	srv := api.NewServer(api.Options{
		Checks:   []pleg.HealthCheck{{Name: "PLEG", Healthy: func() (bool, error) { return true, nil }}},
		Cache:    d.cache,
		Journal:  d.journal,
		Gatherer: reg,
		Logger:   slog.New(slog.DiscardHandler),
	})
	t.Cleanup(srv.Close)
	d.handler = srv
	return d
}

// nilRuntime lets the test register the generator's metrics; it is never
// called.
type nilRuntime struct{ runtime.Runtime }

func (d *daemon) append(pod string) uint64 {
	return journaltest.Append(d.journal, pleg.Event{PodUID: "uid-" + pod, PodName: pod, PodNamespace: "ns", Type: pleg.ContainerStarted, ContainerID: "c-" + pod, Observed: time.Now()})
}

func serve(t *testing.T, h http.Handler) (*httptest.Server, *Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func TestReadsHealthMetricsAndPods(t *testing.T) {
	d := newDaemon(t, 1)
	d.cache.Set("uid-web", &runtime.PodStatus{UID: "uid-web", Name: "web", Namespace: "shop"}, nil, time.Now())
	d.cache.UpdateTime(time.Now())
	// Over a unix socket, as the daemon serves by default on a node.
	socket := filepath.Join(shortTempDir(t), "pleg.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.handler}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := New("unix://"+socket, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	h, err := c.Health(ctx)
	if err != nil || !h.OK || h.Message != "ok" {
		t.Errorf("Health = %+v, %v", h, err)
	}
	families, err := c.Metrics(ctx)
	if err != nil || families["kubelet_pleg_relist_duration_seconds"] == nil {
		t.Errorf("Metrics: %v, %d families", err, len(families))
	}
	pods, err := c.Pods(ctx)
	if err != nil || len(pods.Pods) != 1 || pods.Pods[0].Name != "web" || pods.GlobalTimestamp == nil {
		t.Errorf("Pods = %+v, %v", pods, err)
	}
	if p, err := c.Pod(ctx, "uid-web"); err != nil || p.Namespace != "shop" {
		t.Errorf("Pod = %+v, %v", p, err)
	}
	var status *StatusError
	if _, err := c.Pod(ctx, "uid-none"); !errors.As(err, &status) || status.Code != http.StatusNotFound || !strings.Contains(status.Message, "uid-none") {
		t.Errorf("Pod of a pod the daemon does not hold: %v", err)
	}
}

func TestUnhealthyIsAnAnswerNotAnError(t *testing.T) {
	_, c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "PLEG is not healthy: pleg has yet to be successful\n")
	}))
	h, err := c.Health(t.Context())
	if err != nil || h.OK || h.Message != "PLEG is not healthy: pleg has yet to be successful" {
		t.Errorf("Health = %+v, %v", h, err)
	}
}

// shortTempDir is a directory whose path leaves room for a socket name
// within the 108 bytes a unix socket path may have.
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "plegc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// collector gathers what Follow hands over and says when it holds n.
type collector struct {
	mu     sync.Mutex
	events []api.Event
	grew   chan struct{}
}

func newCollector() *collector { return &collector{grew: make(chan struct{}, 1)} }

func (c *collector) handle(ev api.Event) error {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
	select {
	case c.grew <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until n events arrived and returns them; go test's
// -timeout bounds the wait.
func (c *collector) waitFor(t *testing.T, n int) []api.Event {
	t.Helper()
	for {
		c.mu.Lock()
		got := append([]api.Event(nil), c.events...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-c.grew:
		case <-t.Context().Done():
			t.Fatalf("got %d events, want %d", len(got), n)
		}
	}
}

func describe(evs []api.Event) string {
	var parts []string
	for _, e := range evs {
		if e.Type == api.TypeGap {
			parts = append(parts, fmt.Sprintf("Gap(%d..%d)", e.From, e.To))
		} else {
			parts = append(parts, fmt.Sprintf("%d:%s", e.Seq, e.PodName))
		}
	}
	return strings.Join(parts, " ")
}

// tracker counts the event streams a handler opened: a stream counts once
// its headers are written, when the server has fixed where it starts.
type tracker struct {
	h      http.Handler
	opened atomic.Int32
	sse    atomic.Int32
}

func (tr *tracker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/events" {
		tr.h.ServeHTTP(w, r)
		return
	}
	tr.h.ServeHTTP(&headerWriter{ResponseWriter: w, header: func(code int) {
		if code == http.StatusOK {
			if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
				tr.sse.Add(1)
			}
			tr.opened.Add(1)
		}
	}}, r)
}

// waitOpened waits until n streams were opened in all; go test's
// -timeout bounds the wait.
func (tr *tracker) waitOpened(t *testing.T, n int32) {
	t.Helper()
	for tr.opened.Load() < n {
		select {
		case <-t.Context().Done():
			t.Fatalf("%d streams opened, want %d", tr.opened.Load(), n)
		case <-time.After(time.Millisecond):
		}
	}
}

type headerWriter struct {
	http.ResponseWriter
	header func(code int)
	done   bool
}

func (w *headerWriter) WriteHeader(code int) {
	if !w.done {
		w.done = true
		w.header(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *headerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A stream that drops is resumed after the last event read: nothing is
// missed and nothing repeated, in JSON lines and in Server-Sent Events.
func TestFollowResumesAfterADrop(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			d := newDaemon(t, 1000)
			tr := &tracker{h: d.handler}
			srv, c := serve(t, tr)
			got := newCollector()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- c.Follow(ctx, FollowOptions{EventsRequest: EventsRequest{SSE: sse, Filter: api.Filter{Namespaces: []string{"ns"}}}}, got.handle)
			}()
			// A stream starts now: the first events go after it opened.
			tr.waitOpened(t, 1)
			d.append("a")
			d.append("b")
			got.waitFor(t, 2)
			srv.CloseClientConnections()
			// Appended while no stream may be open: the resumed one
			// brings them.
			d.append("c")
			d.append("d")
			evs := got.waitFor(t, 4)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Follow returned %v, want the context's end", err)
			}
			if s := describe(evs); s != "1000:a 1001:b 1002:c 1003:d" {
				t.Errorf("events %s", s)
			}
			if tr.opened.Load() < 2 || (tr.sse.Load() == tr.opened.Load()) != sse {
				t.Errorf("%d streams opened, %d of them SSE", tr.opened.Load(), tr.sse.Load())
			}
		})
	}
}

// A daemon that refuses to resume (a 4xx for since=) is followed from now
// on, after a Gap that says from where events were missed.
func TestFollowRestartsFromNowWhenResumeIsRefused(t *testing.T) {
	d := newDaemon(t, 1000)
	var refused atomic.Bool
	tr := &tracker{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("since") {
			refused.Store(true)
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error": "since 1001 is ahead of the latest event, 10"}`)
			return
		}
		d.handler.ServeHTTP(w, r)
	})}
	srv, c := serve(t, tr)
	got := newCollector()
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- c.Follow(ctx, FollowOptions{}, got.handle) }()
	tr.waitOpened(t, 1)
	d.append("a")
	d.append("b")
	got.waitFor(t, 2)
	srv.CloseClientConnections()
	// The resumed stream is refused; the one from now on opens.
	tr.waitOpened(t, 2)
	d.append("c")
	evs := got.waitFor(t, 4)
	cancel()
	<-done //nolint:errcheck // waits for the goroutine; its error is the cancellation's
	if s := describe(evs); !refused.Load() || s != "1000:a 1001:b Gap(1002..0) 1002:c" {
		t.Errorf("events %s (refused: %v)", s, refused.Load())
	}
}

// A refusal of the first request is the caller's mistake: it is returned,
// not retried.
func TestFollowReturnsARefusal(t *testing.T) {
	d := newDaemon(t, 1)
	_, c := serve(t, d.handler)
	err := c.Follow(t.Context(), FollowOptions{EventsRequest: EventsRequest{Filter: api.Filter{Types: []string{"Exploded"}}}}, newCollector().handle)
	var status *StatusError
	if !errors.As(err, &status) || status.Code != http.StatusBadRequest || !strings.Contains(err.Error(), `unknown event type "Exploded"`) {
		t.Fatalf("Follow = %v, want the 400", err)
	}
}

// A daemon that is busy or failing is waited for: said once, then quiet
// until a stream opens.
func TestFollowWaitsOutABusyDaemon(t *testing.T) {
	d := newDaemon(t, 1)
	var refusals atomic.Int32
	tr := &tracker{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch refusals.Add(1) {
		case 1:
			http.Error(w, "too many", http.StatusTooManyRequests)
		case 2, 3:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		default:
			d.handler.ServeHTTP(w, r)
		}
	})}
	_, c := serve(t, tr)
	var waiting, connected atomic.Int32
	got := newCollector()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(ctx, FollowOptions{
			Waiting:   func(err error) { waiting.Add(1) },
			Connected: func() { connected.Add(1) },
		}, got.handle)
	}()
	tr.waitOpened(t, 1)
	d.append("a")
	got.waitFor(t, 1)
	cancel()
	<-done //nolint:errcheck // waits for the goroutine; its error is the cancellation's
	if waiting.Load() != 1 || connected.Load() != 1 {
		t.Errorf("waiting said %d times, connected %d times; want once each", waiting.Load(), connected.Load())
	}
}

// With nothing listening, Follow says once that it waits and gives up
// after Wait.
func TestFollowGivesUpAfterWait(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "none.sock")
	c, err := New("unix://"+socket, Options{})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var waiting []error
		start := time.Now()
		err := c.Follow(t.Context(), FollowOptions{Wait: 30 * time.Second, Waiting: func(err error) { waiting = append(waiting, err) }},
			func(api.Event) error { return errors.New("no event expected") })
		if err == nil || !strings.Contains(err.Error(), "the daemon at unix://"+socket+" has not answered for 30s") || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("Follow = %v", err)
		}
		if waited := time.Since(start); waited != 30*time.Second {
			t.Errorf("gave up after %v, want 30s", waited)
		}
		if len(waiting) != 1 {
			t.Errorf("waiting said %d times: %v", len(waiting), waiting)
		}
	})
}

// A handler's error ends Follow with that error.
func TestFollowEndsOnTheHandlersError(t *testing.T) {
	d := newDaemon(t, 1)
	tr := &tracker{h: d.handler}
	_, c := serve(t, tr)
	stop := errors.New("enough")
	done := make(chan error, 1)
	go func() { done <- c.Follow(t.Context(), FollowOptions{}, func(api.Event) error { return stop }) }()
	tr.waitOpened(t, 1)
	d.append("a")
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("Follow = %v, want the handler's error", err)
	}
}
