// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/podcache"
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
	// Read returns up to limit entries numbered after `after`, with a
	// gap first if the log no longer holds some of them, and a channel
	// closed when the log next grows.
	Read(after uint64, limit int) ([]journal.Entry, <-chan struct{})
}

// Server serves the API.
type Server struct {
	opts    Options
	routes  []route
	mux     *http.ServeMux // every path
	probes  *http.ServeMux // health and metrics only
	diag    *http.ServeMux // the diagnosis only
	streams chan struct{}  // a token per open stream
	closing chan struct{}
	once    sync.Once

	clientsMu sync.Mutex
	clients   map[string]int // open streams by client
}

// route is one GET path of the API; probe routes are also served by
// Probes, diagnosis routes by Diagnosis.
type route struct {
	path    string
	handler http.Handler
	probe   bool
	// diagnosis routes are also served by Diagnosis.
	diagnosis bool
}

// routesOf lists every GET path the API serves, in the order a 404 names
// them: a new endpoint is one line here.
func (s *Server) routesOf() []route {
	routes := []route{
		{"/healthz", http.HandlerFunc(s.healthz), true, false},
		{"/readyz", http.HandlerFunc(s.readyz), true, false},
		{"/livez", http.HandlerFunc(s.livez), true, false},
	}
	if s.opts.Gatherer != nil {
		routes = append(routes, route{"/metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}), true, false})
	}
	routes = append(routes,
		route{"/v1/pods", http.HandlerFunc(s.pods), false, false},
		route{"/v1/pods/{uid}", http.HandlerFunc(s.pod), false, false},
		route{"/v1/events", http.HandlerFunc(s.events), false, false},
		route{"/v1/history", http.HandlerFunc(s.history), false, false},
	)
	return append(routes, s.doctorRoutes()...)
}

// handle serves rt on the muxes it belongs to, and names it in 404s.
func (s *Server) handle(rt route) {
	s.routes = append(s.routes, rt)
	s.mux.Handle("GET "+rt.path, rt.handler)
	if rt.probe {
		s.probes.Handle("GET "+rt.path, rt.handler)
	}
	if rt.diagnosis {
		s.diag.Handle("GET "+rt.path, rt.handler)
	}
}

// NewServer returns the API over opts, its unset fields read as their
// defaults (see Options.Validate for what it refuses to read).
func NewServer(opts Options) *Server {
	opts = opts.defaulted()
	s := &Server{
		opts:    opts,
		mux:     http.NewServeMux(),
		probes:  http.NewServeMux(),
		diag:    http.NewServeMux(),
		streams: make(chan struct{}, opts.MaxStreams),
		closing: make(chan struct{}),
		clients: map[string]int{},
	}
	for _, rt := range s.routesOf() {
		s.handle(rt)
	}
	// The profiles take every method, as net/http/pprof serves them, and
	// a 404 does not advertise them.
	if opts.Profiling {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
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
	for _, rt := range s.routes {
		if mux == s.mux || (mux == s.probes && rt.probe) || (mux == s.diag && rt.diagnosis) {
			paths = append(paths, rt.path)
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
