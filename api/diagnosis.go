// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// Doctor makes what /v1/doctor and /v1/bundle serve: the daemon's own
// diagnosis of its node, made in the daemon, so that an operator reads it
// through the API server (a pod proxy) or the daemon's socket when the
// runtime is hung and every path through the runtime (kubectl exec,
// logs, port-forward) is too.
type Doctor interface {
	// Diagnose returns a diagnosis of the node, made now or shared with
	// one made moments ago; ErrBusy if it cannot start one now.
	Diagnose(ctx context.Context) (Diagnosis, error)
	// Bundle writes the support bundle, a gzipped tar, to w; ErrBusy if
	// one is being written already.
	Bundle(ctx context.Context, w io.Writer) error
	// Budget bounds how long a diagnosis takes: an answer's deadline is
	// set past it.
	Budget() time.Duration
}

// Diagnosis is one diagnosis, written as JSON or as a page.
type Diagnosis interface {
	WriteJSON(w io.Writer) error
	WriteHTML(w io.Writer) error
}

// ErrBusy is what a Doctor answers when as many diagnoses or bundles as it
// allows are under way.
var ErrBusy = errors.New("a diagnosis or a bundle is under way already: try again in a minute")

// reportCSP keeps a page served through the API server's proxy, on the
// API server's origin, from running or loading anything: the report is
// one self-contained page of markup, styles and inline images.
const reportCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"

// doctorRoutes are the paths of the diagnosis, served on the whole API and
// on the diagnosis listener.
func (s *Server) doctorRoutes() []route {
	if s.opts.Doctor == nil {
		return nil
	}
	return []route{
		{path: "/v1/doctor", handler: http.HandlerFunc(s.doctor), diagnosis: true},
		{path: "/v1/bundle", handler: http.HandlerFunc(s.bundle), diagnosis: true},
	}
}

func (s *Server) doctor(w http.ResponseWriter, r *http.Request) {
	if !queryParses(w, r) {
		return
	}
	q := r.URL.Query()
	format := q.Get("format")
	for k := range q {
		if k != "format" {
			writeError(w, http.StatusBadRequest, "unknown parameter %q: /v1/doctor takes format=json or format=html", k)
			return
		}
	}
	if len(q["format"]) > 1 || (format != "" && format != "json" && format != "html") {
		writeError(w, http.StatusBadRequest, "format %q: want json or html", q["format"])
		return
	}
	// The diagnosis may take its whole budget before the first byte.
	s.extendDeadline(w, s.opts.Doctor.Budget())
	d, err := s.opts.Doctor.Diagnose(r.Context())
	if err != nil {
		s.doctorError(w, err)
		return
	}
	// Written whole before the status: an error is then still an error.
	var buf bytes.Buffer
	if format == "html" {
		err = d.WriteHTML(&buf)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", reportCSP)
	} else {
		err = d.WriteJSON(&buf)
		w.Header().Set("Content-Type", "application/json")
	}
	if err != nil {
		w.Header().Del("Content-Security-Policy")
		writeError(w, http.StatusInternalServerError, "writing the report: %v", err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) bundle(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	// A diagnosis, then the runtime's calls and the host's logs, each
	// under its own deadline.
	s.extendDeadline(w, 3*s.opts.Doctor.Budget())
	// The archive streams: a failure midway cuts it, and gzip's and tar's
	// own ends tell the client it is incomplete.
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="pleg-bundle.tar.gz"`)
	w.Header().Set("Cache-Control", "no-store")
	sw := &startedWriter{w: w}
	err := s.opts.Doctor.Bundle(r.Context(), sw)
	if err != nil && !sw.started {
		w.Header().Del("Content-Disposition")
		s.doctorError(w, err)
		return
	}
	if err != nil {
		s.opts.Logger.Warn("A support bundle was cut short", "err", err)
	}
}

// startedWriter tells whether anything was written.
type startedWriter struct {
	w       io.Writer
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	s.started = true
	return s.w.Write(p)
}

func (s *Server) doctorError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrBusy) {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusTooManyRequests, "%v", err)
		return
	}
	writeError(w, http.StatusServiceUnavailable, "no diagnosis: %v", err)
}

// extendDeadline gives an answer d more than the usual write timeout.
func (s *Server) extendDeadline(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + s.opts.WriteTimeout))
}

// Diagnosis is the part of the API that the diagnosis listener serves:
// /v1/doctor, /v1/bundle and /v1/recordings, and nothing else (no pods,
// no events, no metrics). Through the API server's pod proxy it is what an
// operator reads of a node whose runtime is hung.
func (s *Server) Diagnosis() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(s.diag, w, r) })
}
