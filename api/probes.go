// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/plegkit/pleg"
)

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
	ping := pleg.HealthCheck{Name: "ping", Healthy: func() (bool, error) { return true, nil }}
	s.answerProbes(w, r, "livez", []probe{{ping, "live"}})
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
