// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/podcache"
)

// Defaults of Options.
const (
	DefaultMaxStreams          = 64
	DefaultMaxStreamsPerClient = 16
	DefaultWriteTimeout        = 10 * time.Second
	// DefaultPodsTimeout bounds a whole /v1/pods answer: a list of
	// 10,000 pods is read in well under a second on the node.
	DefaultPodsTimeout       = 30 * time.Second
	DefaultKeepAlive         = 15 * time.Second
	DefaultStreamIdleTimeout = 5 * time.Minute
	// DefaultMaxFilterValues bounds the values of one /v1/events query,
	// all filters together.
	DefaultMaxFilterValues = 128
)

// Cache is what the API reads of the pod cache.
type Cache interface {
	GetAll() map[string]podcache.Entry
	GetEntry(uid string) (podcache.Entry, bool)
	GlobalTime() time.Time
}

// EventLog is what GET /v1/events reads: package journal's Journal.
type EventLog interface {
	// Last returns the number of the latest entry.
	Last() uint64
	// Read returns up to max entries numbered after `after`, with a gap
	// first if the log no longer holds some of them, and a channel closed
	// when the log next grows.
	Read(after uint64, limit int) ([]journal.Entry, <-chan struct{})
}

// Options configure a Server.
type Options struct {
	// Checks are the health checks of /healthz. /readyz does not run
	// them: readiness says that the server serves, not that what it
	// watches is healthy (see readyz).
	Checks []pleg.HealthCheck
	// Ready, if set, tells whether the server has begun to serve what it
	// is for: /readyz fails until it holds (for the daemon, until the
	// first relist has ended, written or failed). Its error says what is
	// awaited.
	Ready func() (bool, error)
	// Mode, if set, tells how the generator learns of changes: a short
	// word for the X-Pleg-Mode header (generic, evented) and a line for
	// /healthz?verbose.
	Mode func() (word, line string)
	// Details, if set, are more lines for /healthz?verbose, after the
	// mode's: what the runtime can do, say.
	Details func() []string
	Cache   Cache
	// Journal is what /v1/events reads.
	Journal EventLog
	// Gatherer serves /metrics; nil serves none.
	Gatherer prometheus.Gatherer
	// Profiling serves Go's profiles under /debug/pprof/.
	Profiling bool
	// MaxStreams caps concurrent /v1/events streams; default 64.
	MaxStreams int
	// MaxStreamsPerClient caps the streams of one client, told by
	// WithClient or else by its IP address; default 16.
	MaxStreamsPerClient int
	// MaxFilterValues caps the filter values of one /v1/events query;
	// default 128.
	MaxFilterValues int
	// WriteTimeout cuts an answer whose client does not take a write
	// within it, a stream's included; every answer but a stream's and
	// a profile's must be written within it too. Default 10 s.
	WriteTimeout time.Duration
	// PodsTimeout bounds a whole /v1/pods answer, however steadily its
	// client reads: each answer holds its snapshot of the cache until it
	// ends. Default 30 s.
	PodsTimeout time.Duration
	// KeepAlive is how often an idle stream writes something, so that
	// proxies keep it and dead clients are found; default 15 s. An NDJSON
	// stream writes an empty line, an SSE stream a comment.
	KeepAlive time.Duration
	// StreamIdleTimeout ends a stream that has sent no event for that
	// long; default 5 min. A client that never reads is found only when
	// the stream's writes fill its buffers, which keep-alives never do:
	// this bounds how long it holds a stream. A client that resumes after
	// its last event loses nothing.
	StreamIdleTimeout time.Duration
	Logger            *slog.Logger
}

// Server serves the API.
type Server struct {
	opts    Options
	mux     *http.ServeMux // every path
	probes  *http.ServeMux // health and metrics only
	streams chan struct{}  // a token per open stream
	closing chan struct{}
	once    sync.Once

	clientsMu sync.Mutex
	clients   map[string]int // open streams by client
}

// NewServer returns the API over opts.
func NewServer(opts Options) *Server {
	if opts.MaxStreams == 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxStreamsPerClient == 0 {
		opts.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if opts.MaxFilterValues == 0 {
		opts.MaxFilterValues = DefaultMaxFilterValues
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.PodsTimeout == 0 {
		opts.PodsTimeout = DefaultPodsTimeout
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		opts:    opts,
		mux:     http.NewServeMux(),
		probes:  http.NewServeMux(),
		streams: make(chan struct{}, opts.MaxStreams),
		closing: make(chan struct{}),
		clients: map[string]int{},
	}
	for _, mux := range []*http.ServeMux{s.mux, s.probes} {
		mux.HandleFunc("GET /healthz", s.healthz)
		mux.HandleFunc("GET /readyz", s.readyz)
		mux.HandleFunc("GET /livez", s.livez)
		if opts.Gatherer != nil {
			mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
		}
	}
	if opts.Profiling {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.mux.HandleFunc("GET /v1/pods", s.pods)
	s.mux.HandleFunc("GET /v1/pods/{uid}", s.pod)
	s.mux.HandleFunc("GET /v1/events", s.events)
	s.mux.HandleFunc("GET /v1/history", s.history)
	return s
}

// ServeHTTP implements http.Handler: the whole API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(s.mux, w, r) }

// Probes is the part of the API fit to face a network: /healthz, /readyz,
// /livez and /metrics, for the kubelet's probes and Prometheus.
func (s *Server) Probes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(s.probes, w, r) })
}

// serve routes r on mux, answering a path that mux does not serve with a
// JSON 404, and a method it does not serve there with a 405 and Allow.
func (s *Server) serve(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	// Every answer is JSON, text or a stream of its declared type: no
	// browser may guess otherwise.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// A client that does not read holds its handler, and what it has
	// built, until the write deadline. Streams and /v1/pods set theirs
	// as they write; a profile takes as long as it is asked to.
	if !strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	}
	if _, pattern := mux.Handler(r); pattern != "" {
		mux.ServeHTTP(w, r)
		return
	}
	get := r.Clone(r.Context())
	get.Method = http.MethodGet
	if _, pattern := mux.Handler(get); pattern != "" {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "%s %s: only GET and HEAD are served here", r.Method, r.URL.Path)
		return
	}
	var paths []string
	for _, p := range []string{"/healthz", "/readyz", "/livez", "/metrics", "/v1/pods", "/v1/pods/{uid}", "/v1/events"} {
		probe := get.Clone(get.Context())
		probe.URL.Path = strings.Replace(p, "{uid}", "x", 1)
		if _, pattern := mux.Handler(probe); pattern != "" {
			paths = append(paths, p)
		}
	}
	writeError(w, http.StatusNotFound, "no such path: %s %s (try %s)", r.Method, r.URL.Path, strings.Join(paths, ", "))
}

// Close ends every event stream cleanly and turns /readyz unready;
// http.Server.Shutdown waits for handlers but does not end them, so call
// Close first (or register it with RegisterOnShutdown).
func (s *Server) Close() { s.once.Do(func() { close(s.closing) }) }

func (s *Server) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// Unhealthy returns the failures of the health checks, worded as the
// kubelet words them.
func (s *Server) Unhealthy() []string {
	var errs []string
	for _, c := range s.opts.Checks {
		if ok, err := c.Healthy(); !ok {
			errs = append(errs, fmt.Sprintf("%s is not healthy: %v", c.Name, err))
		}
	}
	return errs
}

// probe is one check of a health endpoint, with the word its failure
// takes: "PLEG is not healthy: ...", "cache is not ready: ...".
type probe struct {
	pleg.HealthCheck
	failed string
}

// healthz answers as the kubelet's health checks read: "ok", or the
// failures. With ?verbose it lists every check and the mode in force.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.answerProbes(w, r, "healthz", s.healthChecks())
}

// readyz tells that the server serves: Ready holds and the server is not
// shutting down, Kubernetes' /readyz. The health checks are not part of
// it: a monitor that answers "the runtime is unhealthy" is doing its job,
// and a sick runtime on one node must not hold a rollout of the monitor
// on every node, nor fail an install that waits for readiness; /healthz
// tells the runtime's health.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	var checks []probe
	if s.opts.Ready != nil {
		checks = append(checks, probe{pleg.HealthCheck{Name: "first-relist", Healthy: s.opts.Ready}, "ready"})
	}
	checks = append(checks, probe{pleg.HealthCheck{Name: "server", Healthy: func() (bool, error) {
		if s.closed() {
			return false, errors.New("shutting down")
		}
		return true, nil
	}}, "ready"})
	s.answerProbes(w, r, "readyz", checks)
}

// livez fails only when a restart would help: while it answers, the
// daemon serves. A runtime that is down or slow is no reason to restart
// the daemon, so the PLEG's health is not part of it.
func (s *Server) livez(w http.ResponseWriter, r *http.Request) {
	s.answerProbes(
		w,
		r,
		"livez",
		[]probe{{pleg.HealthCheck{Name: "ping", Healthy: func() (bool, error) { return true, nil }}, "live"}},
	)
}

func (s *Server) healthChecks() []probe {
	checks := make([]probe, 0, len(s.opts.Checks)+2)
	for _, c := range s.opts.Checks {
		checks = append(checks, probe{c, "healthy"})
	}
	return checks
}

// answerProbes runs checks and answers "ok" (200) or their failures
// (500); with ?verbose, one line per check, the mode, and a verdict.
func (s *Server) answerProbes(w http.ResponseWriter, r *http.Request, name string, checks []probe) {
	verbose := false
	for key := range r.URL.Query() {
		if key != "verbose" {
			writeError(w, http.StatusBadRequest, "unknown query parameter %q (want verbose)", key)
			return
		}
		verbose = true
	}
	if !queryParses(w, r) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var word, line string
	if s.opts.Mode != nil {
		word, line = s.opts.Mode()
		w.Header().Set("X-Pleg-Mode", word)
	}
	var b strings.Builder
	var errs []string
	for _, c := range checks {
		ok, err := c.Healthy()
		switch {
		case ok:
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		default:
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
			errs = append(errs, fmt.Sprintf("%s is not %s: %v", c.Name, c.failed, err))
		}
	}
	if len(errs) > 0 {
		w.WriteHeader(http.StatusInternalServerError)
	}
	if !verbose {
		if len(errs) > 0 {
			_, _ = fmt.Fprintln(w, strings.Join(errs, "; ")) // the client gone: nothing to do
		} else {
			_, _ = fmt.Fprintln(w, "ok")
		}
		return
	}
	if line != "" {
		fmt.Fprintln(&b, line)
	}
	if s.opts.Details != nil {
		for _, l := range s.opts.Details() {
			fmt.Fprintln(&b, l)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(&b, "%s check failed\n", name)
	} else {
		fmt.Fprintf(&b, "%s check passed\n", name)
	}
	_, _ = io.WriteString(w, b.String())
}

func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// The list is written as it is encoded, from a snapshot of the cache
	// that the answer holds until it ends. A client that stops taking it
	// is cut at the write timeout, as a stream's is; one that reads a
	// trickle, at the answer's own deadline.
	dw := &deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout,
		end: time.Now().Add(s.opts.PodsTimeout)}
	_ = WritePodList(dw, s.opts.Cache.GetAll(), s.opts.Cache.GlobalTime())
}

// deadlineWriter gives each write to a response a deadline of its own,
// and never one past the response's end.
type deadlineWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	end     time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	deadline := time.Now().Add(d.timeout)
	if deadline.After(d.end) {
		deadline = d.end
	}
	_ = d.rc.SetWriteDeadline(deadline)
	return d.w.Write(p)
}

func (s *Server) pod(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	uid := r.PathValue("uid")
	e, ok := s.opts.Cache.GetEntry(uid)
	if !ok {
		s.removedPod(w, uid)
		return
	}
	writeJSON(w, http.StatusOK, NewPod(uid, e))
}

// noQuery refuses a query string on paths that take none: a typo in a
// filter must not silently return everything.
func noQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery != "" {
		writeError(w, http.StatusBadRequest, "%s takes no query parameters, got %q", r.URL.Path, r.URL.RawQuery)
		return false
	}
	return true
}

// queryParses refuses a query string that does not parse: url.Query
// drops what it cannot decode, which would turn since=%zz into no since.
func queryParses(w http.ResponseWriter, r *http.Request) bool {
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		writeError(w, http.StatusBadRequest, "query %q does not parse: %v", r.URL.RawQuery, err)
		return false
	}
	return true
}

// Filter selects events: an event passes when it matches one of the
// values of every field that has values. A gap always passes: a client
// must know it missed something.
type Filter struct {
	// Pods are pod UIDs or names.
	Pods       []string
	Namespaces []string
	Types      []string
}

// Match reports whether ev passes the filter. To match many events, make
// a Matcher once.
func (f Filter) Match(ev *Event) bool { return f.Matcher().Match(ev) }

// Matcher is a Filter made into sets, for matching many events.
type Matcher struct {
	pods, namespaces, types set
}

type set map[string]struct{}

func newSet(values []string) set {
	if len(values) == 0 {
		return nil
	}
	s := make(set, len(values))
	for _, v := range values {
		s[v] = struct{}{}
	}
	return s
}

// has reports whether any of values is in s; an empty s has everything.
func (s set) has(values ...string) bool {
	if s == nil {
		return true
	}
	for _, v := range values {
		if _, ok := s[v]; ok {
			return true
		}
	}
	return false
}

// Matcher returns the filter as sets.
func (f Filter) Matcher() *Matcher {
	return &Matcher{pods: newSet(f.Pods), namespaces: newSet(f.Namespaces), types: newSet(f.Types)}
}

// Match reports whether ev passes the filter.
func (m *Matcher) Match(ev *Event) bool {
	if ev.Type == TypeGap {
		return true
	}
	return m.pods.has(ev.PodUID, ev.PodName) && m.namespaces.has(ev.PodNamespace) && m.types.has(ev.Type)
}

// Query is the filter as /v1/events query parameters.
func (f Filter) Query() url.Values {
	q := url.Values{}
	for _, p := range f.Pods {
		q.Add("pod", p)
	}
	for _, n := range f.Namespaces {
		q.Add("namespace", n)
	}
	for _, t := range f.Types {
		q.Add("type", t)
	}
	return q
}

// Validate checks the filter's values.
func (f Filter) Validate() error {
	for _, t := range f.Types {
		if !slices.Contains(EventTypes(), t) {
			return fmt.Errorf("unknown event type %q (want one of %s)", t, strings.Join(EventTypes(), ", "))
		}
	}
	for _, v := range slices.Concat(f.Pods, f.Namespaces) {
		if v == "" {
			return errors.New("empty pod or namespace filter")
		}
	}
	return nil
}

// values counts the filter's values.
func (f Filter) values() int { return len(f.Pods) + len(f.Namespaces) + len(f.Types) }

// eventQuery is a parsed /v1/events query.
type eventQuery struct {
	*Matcher
	f        Filter
	since    uint64
	hasSince bool
	sse      bool
}

// EventTypes are the types a client may filter on.
func EventTypes() []string {
	return []string{string(pleg.ContainerStarted), string(pleg.ContainerDied), string(pleg.ContainerRemoved),
		string(pleg.PodSync), string(pleg.ConditionMet), TypeGap}
}

// parseEventQuery parses a /v1/events request, with at most maxValues
// filter values.
func parseEventQuery(r *http.Request, maxValues int) (eventQuery, error) {
	q := eventQuery{sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, fmt.Errorf("query %q does not parse: %w", r.URL.RawQuery, err)
	}
	var f Filter
	for key, vals := range values {
		switch key {
		case "pod":
			f.Pods = append(f.Pods, vals...)
		case "namespace":
			f.Namespaces = append(f.Namespaces, vals...)
		case "type":
			f.Types = append(f.Types, vals...)
		case "since":
			if len(vals) != 1 {
				return q, errors.New("since given more than once")
			}
		default:
			return q, fmt.Errorf("unknown query parameter %q (want pod, namespace, type or since)", key)
		}
	}
	if n := f.values(); n > maxValues {
		return q, fmt.Errorf("%d filter values, more than the %d a query may have", n, maxValues)
	}
	if err := f.Validate(); err != nil {
		return q, err
	}
	q.f, q.Matcher = f, f.Matcher()
	since := values.Get("since")
	if since == "" {
		since = r.Header.Get("Last-Event-ID")
	}
	if since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return q, fmt.Errorf("since %q is not a sequence number", since)
		}
		q.since, q.hasSince = n, true
	}
	return q, nil
}

type clientContextKey struct{}

// WithClient returns ctx naming the client of the requests it carries,
// for the per-client stream cap: a server that knows more of a connection
// than its address (the daemon tells a unix socket's peer by user ID)
// sets it in http.Server.ConnContext.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientContextKey{}, client)
}

// clientKey names the client of r for the per-client stream cap: what
// WithClient said, else its IP address, else "local" (a unix socket whose
// server does not tell its peers apart).
func clientKey(r *http.Request) string {
	if client, ok := r.Context().Value(clientContextKey{}).(string); ok && client != "" {
		return client
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return "local"
	}
	return host
}

// acquireStream takes a stream slot for client, or says why not.
func (s *Server) acquireStream(client string) (release func(), refusal string) {
	s.clientsMu.Lock()
	if s.clients[client] >= s.opts.MaxStreamsPerClient {
		s.clientsMu.Unlock()
		return nil, fmt.Sprintf(
			"%d event streams are open from %s, the most one client may have",
			s.opts.MaxStreamsPerClient,
			client,
		)
	}
	s.clients[client]++
	s.clientsMu.Unlock()
	select {
	case s.streams <- struct{}{}:
	default:
		s.releaseClient(client)
		return nil, fmt.Sprintf("%d event streams are open, the most this server serves", s.opts.MaxStreams)
	}
	return func() {
		<-s.streams
		s.releaseClient(client)
	}, ""
}

func (s *Server) releaseClient(client string) {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	if s.clients[client]--; s.clients[client] <= 0 {
		delete(s.clients, client)
	}
}

// replayBatch is how many events a stream reads from the journal at once.
const replayBatch = 256

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventQuery(r, s.opts.MaxFilterValues)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	client := clientKey(r)
	release, refusal := s.acquireStream(client)
	if release == nil {
		writeError(w, http.StatusTooManyRequests, "%s", refusal)
		return
	}
	defer release()
	st := s.openStream(w, r, q, client)
	if err := st.flush(); err != nil {
		return
	}
	st.serve()
}

// eventStream is one client's answer to /v1/events, as it is written.
type eventStream struct {
	s      *Server
	r      *http.Request
	q      eventQuery
	client string
	rc     *http.ResponseController
	bw     *bufio.Writer
	cursor uint64 // the last event read from the journal
}

// openStream writes the answer's headers; the events follow from the
// query's since, else from now on.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, q eventQuery, client string) *eventStream {
	cursor := s.opts.Journal.Last()
	if q.hasSince {
		cursor = q.since
	}
	if q.sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return &eventStream{
		s: s, r: r, q: q, client: client, cursor: cursor,
		rc: http.NewResponseController(w), bw: bufio.NewWriter(w),
	}
}

// flush sends what is buffered, within the server's write timeout.
func (st *eventStream) flush() error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.opts.WriteTimeout))
	if err := st.bw.Flush(); err != nil {
		return err
	}
	return st.rc.Flush()
}

// serve replays the journal from the cursor, then sends each event as it
// is written, until the client goes, the server closes or the stream has
// been idle for StreamIdleTimeout.
func (st *eventStream) serve() {
	opts := &st.s.opts
	keepAlive := time.NewTicker(opts.KeepAlive)
	defer keepAlive.Stop()
	idle := time.NewTimer(opts.StreamIdleTimeout)
	defer idle.Stop()
	for {
		entries, grew := opts.Journal.Read(st.cursor, replayBatch)
		if len(entries) > 0 {
			sent, err := st.send(entries)
			if err != nil {
				return
			}
			if sent {
				idle.Reset(opts.StreamIdleTimeout)
			}
			// A long backlog is replayed batch by batch: a shutdown or a
			// client gone ends it between two.
			if st.ending() {
				return
			}
			continue
		}
		if !st.wait(grew, keepAlive.C, idle.C) {
			return
		}
	}
}

// send writes the entries the query matches and flushes them; it tells
// whether any matched.
func (st *eventStream) send(entries []journal.Entry) (sent bool, err error) {
	for _, e := range entries {
		st.cursor = e.Seq
		ev := NewEntry(e)
		if st.q.Match(&ev) {
			if err := writeEvent(st.bw, &ev, st.q.sse); err != nil {
				return sent, err
			}
			sent = true
		}
	}
	if err := st.flush(); err != nil {
		st.s.opts.Logger.Debug("Event stream client gone or too slow", "client", st.client, "err", err)
		return sent, err
	}
	return sent, nil
}

// ending tells whether the client has gone or the server is closing.
func (st *eventStream) ending() bool {
	select {
	case <-st.r.Context().Done():
		return true
	case <-st.s.closing:
		return true
	default:
		return false
	}
}

// wait waits for the journal to grow, sending a keep-alive when it is
// due; it tells whether the stream goes on.
func (st *eventStream) wait(grew <-chan struct{}, keepAlive <-chan time.Time, idle <-chan time.Time) bool {
	select {
	case <-grew:
		return true
	case <-keepAlive:
		if st.q.sse {
			_, _ = st.bw.WriteString(": keep-alive\n\n")
		} else {
			_, _ = st.bw.WriteString("\n")
		}
		return st.flush() == nil
	case <-idle:
		st.s.opts.Logger.Debug("Event stream idle for too long, ended",
			"client", st.client, "idle", st.s.opts.StreamIdleTimeout)
		return false
	case <-st.r.Context().Done():
		return false
	case <-st.s.closing:
		return false
	}
}

func writeEvent(w *bufio.Writer, ev *Event, sse bool) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if sse {
		// No "event:" field: the type is in the data, and unnamed events
		// reach an EventSource's onmessage.
		_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev.Seq, data)
		return err
	}
	data = append(data, '\n')
	_, err = w.Write(data)
	return err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, Error{Error: fmt.Sprintf(format, args...)})
}
