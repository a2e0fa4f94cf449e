// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"errors"
	"io/fs"
	"net/http"

	"github.com/plegkit/pleg/flightrec"
)

// Recordings is what /v1/recordings reads: the flight recorder's store.
type Recordings interface {
	List() ([]flightrec.Entry, error)
	Read(name string) (*flightrec.Recording, error)
}

// RecordingList is the body of GET /v1/recordings.
type RecordingList struct {
	Recordings []flightrec.Entry `json:"recordings"`
}

// HandleRecordings serves the flight recorder's recordings from rec:
// GET /v1/recordings lists them, the oldest first, and
// GET /v1/recordings/{name} is one. A nil rec answers 404, telling that
// the recorder is off. Call it before the server serves.
func (s *Server) HandleRecordings(rec Recordings) {
	list := func(w http.ResponseWriter, r *http.Request) {
		if !noQuery(w, r) || !recorderOn(w, rec) {
			return
		}
		list, err := rec.List()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "listing the recordings: %v", err)
			return
		}
		if list == nil {
			list = []flightrec.Entry{}
		}
		writeJSON(w, http.StatusOK, RecordingList{Recordings: list})
	}
	read := func(w http.ResponseWriter, r *http.Request) {
		if !noQuery(w, r) || !recorderOn(w, rec) {
			return
		}
		name := r.PathValue("name")
		if !flightrec.ValidName(name) {
			writeError(w, http.StatusNotFound, "%q is not a recording's name", name)
			return
		}
		one, err := rec.Read(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			writeError(w, http.StatusNotFound, "no recording %q (the oldest are dropped past the bounds)", name)
		case err != nil:
			writeError(w, http.StatusInternalServerError, "reading recording %q: %v", name, err)
		default:
			writeJSON(w, http.StatusOK, one)
		}
	}
	s.handle(route{path: "/v1/recordings", diagnosis: true, handler: http.HandlerFunc(list)})
	s.handle(route{path: "/v1/recordings/{name}", diagnosis: true, handler: http.HandlerFunc(read)})
}

func recorderOn(w http.ResponseWriter, rec Recordings) bool {
	if rec == nil {
		writeError(w, http.StatusNotFound, "the flight recorder is off: pleg runs without --state-dir, or with "+
			"--flight-recorder=false")
		return false
	}
	return true
}
