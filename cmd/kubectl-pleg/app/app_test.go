// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/flightrec"
)

// fakeProxy serves a node's pleg from a handler, as the API server's pod
// proxy would.
type fakeProxy struct {
	node  string
	h     http.Handler
	paths []string
}

func (f *fakeProxy) Find(_ context.Context, node string) (string, string, error) {
	if node != f.node {
		return "", "", errors.New("no running pod of app.kubernetes.io/name=pleg on node " + node)
	}
	return "pleg-abcde", "9848", nil
}

func (f *fakeProxy) Get(_ context.Context, _, _, path string, _ map[string]string) (io.ReadCloser, error) {
	f.paths = append(f.paths, path)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	if w.Code != 200 {
		return nil, errors.New(w.Body.String())
	}
	return io.NopCloser(w.Body), nil
}

// node is a node's pleg: an unhealthy diagnosis, one recording, a bundle.
func node(t *testing.T) http.Handler {
	t.Helper()
	const name = "20261126T212233.123Z-stuck-process"
	rep := &doctor.Report{Verdict: doctor.Unhealthy, Findings: []doctor.Finding{{ID: "runtime-unreachable",
		Severity: doctor.Critical, Title: "The container runtime does not answer"}}}
	rec := &flightrec.Recording{Version: 1, Name: name, Trigger: "stuck-process", Reason: "containerd is stopped (T)",
		Processes: &flightrec.Processes{List: []flightrec.Process{{Pid: 7, Comm: "containerd", Role: "runtime", State: "T"}}}}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/doctor", func(w http.ResponseWriter, _ *http.Request) { _ = render.JSON(w, rep) })
	mux.HandleFunc("/v1/recordings", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"recordings":[{"name":"`+name+`","trigger":"stuck-process"}]}`)
	})
	mux.HandleFunc("/v1/recordings/"+name, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(rec) // as the API serves it
	})
	mux.HandleFunc("/v1/bundle", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "\x1f\x8bbundle") })
	return mux
}

func TestCommands(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		code     int // the exit status: 0, the verdict's, or -1 for an error
		stdout   string
		paths    string
		fileWith map[string]string
	}{
		{args: []string{"doctor", "node-1"}, code: 2, stdout: "The container runtime does not answer", paths: "/v1/doctor"},
		{args: []string{"doctor", "node-1", "-o", "json"}, code: 2, stdout: `"runtime-unreachable"`},
		{args: []string{"doctor", "node-1", "--html", filepath.Join(dir, "r.html")}, code: 2,
			fileWith: map[string]string{"r.html": "<html"}},
		{args: []string{"doctor", "node-2"}, code: -1},
		{args: []string{"doctor", "node-1", "-o", "yaml"}, code: -1},
		{args: []string{"recordings", "node-1"}, stdout: "stuck-process", paths: "/v1/recordings"},
		{args: []string{"recordings", "node-1", "latest"}, code: 2, stdout: "containerd",
			paths: "/v1/recordings /v1/recordings/20261126T212233.123Z-stuck-process"},
		{args: []string{"recordings", "node-1", "../x"}, code: -1},
		{args: []string{"bundle", "node-1", "-f", filepath.Join(dir, "b.tar.gz")}, paths: "/v1/bundle",
			fileWith: map[string]string{"b.tar.gz": "bundle"}},
		{args: []string{"bundle"}, code: -1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			px := &fakeProxy{node: "node-1", h: node(t)}
			cmd := newCommand(&stdout, &stderr, px)
			cmd.SetArgs(tc.args)
			err := cmd.ExecuteContext(context.Background())
			var code ExitCode
			switch {
			case errors.As(err, &code):
			case err != nil:
				code = -1
			}
			if int(code) != tc.code {
				t.Fatalf("exit %d (%v), want %d\nstdout: %s\nstderr: %s", code, err, tc.code, &stdout, &stderr)
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, &stdout)
			}
			if tc.paths != "" && strings.Join(px.paths, " ") != tc.paths {
				t.Errorf("asked %v, want %s", px.paths, tc.paths)
			}
			for name, want := range tc.fileWith {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || !strings.Contains(string(b), want) {
					t.Errorf("%s: %v %.100q, want %q", name, err, b, want)
				}
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().Perm() != 0o600 {
					t.Errorf("%s is %v, want 0600", name, fi.Mode().Perm())
				}
			}
		})
	}
}
