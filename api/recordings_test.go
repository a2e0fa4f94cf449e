// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/flightrec"
)

// fakeRecordings holds recordings by name.
type fakeRecordings map[string]*flightrec.Recording

func (f fakeRecordings) List() ([]flightrec.Entry, error) {
	var out []flightrec.Entry
	for name, r := range f {
		out = append(out, flightrec.Entry{Name: name, Trigger: r.Trigger, Time: r.Onset, Bytes: 100})
	}
	return out, nil
}

func (f fakeRecordings) Read(name string) (*flightrec.Recording, error) {
	if r, ok := f[name]; ok {
		return r, nil
	}
	return nil, fs.ErrNotExist
}

func TestRecordings(t *testing.T) {
	const name = "20261126T120000.000Z-unhealthy"
	rec := &flightrec.Recording{Version: 1, Name: name, Trigger: "unhealthy", Onset: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	on := NewServer(Options{})
	on.HandleRecordings(fakeRecordings{name: rec})
	off := NewServer(Options{})
	off.HandleRecordings(nil)
	for _, tc := range []struct {
		srv      *Server
		path     string
		code     int
		contains string
	}{
		{on, "/v1/recordings", 200, `"name": "` + name + `"`},
		{on, "/v1/recordings/" + name, 200, `"trigger": "unhealthy"`},
		{on, "/v1/recordings/20261126T130000.000Z-unhealthy", 404, "no recording"},
		{on, "/v1/recordings/..%2Fstate", 404, "not a recording's name"},
		{on, "/v1/recordings?x=1", 400, ""},
		{off, "/v1/recordings", 404, "the flight recorder is off"},
	} {
		w := httptest.NewRecorder()
		tc.srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.contains) {
			t.Errorf("GET %s: %d %s, want %d with %q", tc.path, w.Code, w.Body, tc.code, tc.contains)
		}
		if tc.code == 200 && tc.path == "/v1/recordings" {
			var l RecordingList
			if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || len(l.Recordings) != 1 {
				t.Errorf("list %s: %v", w.Body, err)
			}
		}
	}
}
