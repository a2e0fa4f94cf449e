// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeDoctor answers with a fixed diagnosis, or an error.
type fakeDoctor struct {
	err       error
	bundleErr error
}

type fakeDiagnosis struct{}

func (fakeDiagnosis) WriteJSON(w io.Writer) error {
	_, err := io.WriteString(w, `{"verdict":"unhealthy"}`)
	return err
}

func (fakeDiagnosis) WriteHTML(w io.Writer) error {
	_, err := io.WriteString(w, "<html>unhealthy</html>")
	return err
}

func (f fakeDoctor) Diagnose(context.Context) (Diagnosis, error) {
	if f.err != nil {
		return nil, f.err
	}
	return fakeDiagnosis{}, nil
}

func (f fakeDoctor) Bundle(_ context.Context, w io.Writer) error {
	if f.bundleErr != nil {
		return f.bundleErr
	}
	_, err := io.WriteString(w, "\x1f\x8bbundle")
	return err
}

func (fakeDoctor) Budget() time.Duration { return time.Second }

func TestDoctor(t *testing.T) {
	srv := NewServer(Options{Doctor: fakeDoctor{}})
	srv.HandleRecordings(fakeRecordings{})
	busy := NewServer(Options{Doctor: fakeDoctor{err: ErrBusy, bundleErr: ErrBusy}})
	failing := NewServer(Options{Doctor: fakeDoctor{err: errors.New("no runtime found yet")}})
	none := NewServer(Options{})
	for _, tc := range []struct {
		name     string
		h        http.Handler
		path     string
		code     int
		contains string
		ctype    string
	}{
		{"json", srv, "/v1/doctor", 200, `"verdict":"unhealthy"`, "application/json"},
		{"json asked", srv, "/v1/doctor?format=json", 200, `"verdict"`, "application/json"},
		{"page", srv, "/v1/doctor?format=html", 200, "<html>", "text/html; charset=utf-8"},
		{"bad format", srv, "/v1/doctor?format=pdf", 400, "want json or html", ""},
		{"two formats", srv, "/v1/doctor?format=json&format=html", 400, "want json or html", ""},
		{"unknown parameter", srv, "/v1/doctor?verbose=1", 400, "unknown parameter", ""},
		{"bundle", srv, "/v1/bundle", 200, "bundle", "application/gzip"},
		{"bundle takes no query", srv, "/v1/bundle?x=1", 400, "", ""},
		{"busy", busy, "/v1/doctor", 429, "under way", ""},
		{"bundle busy", busy, "/v1/bundle", 429, "under way", ""},
		{"no runtime", failing, "/v1/doctor", 503, "no runtime found yet", ""},
		{"without a doctor", none, "/v1/doctor", 404, "no such path", ""},
		// The diagnosis listener: the diagnosis and the recordings, and
		// nothing else of the API.
		{"diagnosis: doctor", srv.Diagnosis(), "/v1/doctor", 200, `"verdict"`, ""},
		{"diagnosis: recordings", srv.Diagnosis(), "/v1/recordings", 200, `"recordings"`, ""},
		{"diagnosis: bundle", srv.Diagnosis(), "/v1/bundle", 200, "bundle", ""},
		{"diagnosis: no pods", srv.Diagnosis(), "/v1/pods", 404, "try /v1/doctor, /v1/bundle, /v1/recordings", ""},
		{"diagnosis: no events", srv.Diagnosis(), "/v1/events", 404, "", ""},
		{"diagnosis: no metrics", srv.Diagnosis(), "/metrics", 404, "", ""},
		{"diagnosis: GET only", srv.Diagnosis(), "POST /v1/doctor", 405, "only GET", ""},
		{"probes: no doctor", srv.Probes(), "/v1/doctor", 404, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path, ok := strings.Cut(tc.path, " ")
			if !ok {
				method, path = http.MethodGet, tc.path
			}
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.contains) {
				t.Errorf("%s: %d %s, want %d with %q", tc.path, w.Code, w.Body, tc.code, tc.contains)
			}
			if tc.ctype != "" && w.Header().Get("Content-Type") != tc.ctype {
				t.Errorf("Content-Type %q, want %q", w.Header().Get("Content-Type"), tc.ctype)
			}
			if strings.Contains(tc.path, "html") && w.Code == 200 &&
				!strings.Contains(w.Header().Get("Content-Security-Policy"), "sandbox") {
				t.Errorf("a page without a sandboxing CSP: %q", w.Header().Get("Content-Security-Policy"))
			}
		})
	}
}
