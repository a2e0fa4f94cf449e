// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"io"
	"net/http"
	"time"
)

// pods answers GET /v1/pods: every pod in the cache.
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

// pod answers GET /v1/pods/{uid}: one pod, or a 404.
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
