// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Dir is the directory recordings are kept in, under the state directory.
const Dir = "recordings"

// ext is the extension of a recording's file.
const ext = ".json"

// maxRecordingBytes bounds the file a reader accepts.
const maxRecordingBytes = 64 << 20

// namePattern is a recording's name: its time and trigger. Names are
// checked against it before they touch a path, so that a name from a
// request never leaves the directory.
var namePattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[a-z-]+$`)

// Store keeps recordings in a directory: root-only (0700, files 0600),
// at most MaxCount of them and MaxBytes together, the oldest dropped
// first.
type Store struct {
	Dir      string
	MaxCount int
	MaxBytes int64
}

// Entry is a recording in a listing.
type Entry struct {
	Name    string    `json:"name"`
	Trigger string    `json:"trigger"`
	Time    time.Time `json:"time"`
	Bytes   int64     `json:"bytes"`
}

// ValidName tells whether name can be a recording's.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// recordingName names a recording of onset and trigger; it sorts by time.
func recordingName(onset time.Time, trigger string) string {
	return onset.UTC().Format("20060102T150405.000Z") + "-" + trigger
}

// Open makes the directory, root-only, tightening one made looser.
func (s *Store) Open() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(s.Dir, 0o700)
}

// Write writes rec, then drops the oldest recordings past the bounds (rec
// itself kept if it alone passes MaxBytes: the newest tells the most). It
// returns the names dropped.
func (s *Store) Write(rec *Recording) (dropped []string, err error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(s.Dir, ".rec-*")
	if err != nil {
		return nil, err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(s.Dir, rec.Name+ext))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, err
	}
	return s.prune(rec.Name)
}

// prune drops the oldest recordings past the bounds, never keep.
func (s *Store) prune(keep string) ([]string, error) {
	entries, err := s.List()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range entries {
		total += e.Bytes
	}
	var dropped []string
	for len(entries) > 0 && ((s.MaxCount > 0 && len(entries) > s.MaxCount) || (s.MaxBytes > 0 && total > s.MaxBytes)) {
		e := entries[0]
		if e.Name == keep {
			break
		}
		if err := os.Remove(filepath.Join(s.Dir, e.Name+ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return dropped, err
		}
		dropped = append(dropped, e.Name)
		total -= e.Bytes
		entries = entries[1:]
	}
	return dropped, nil
}

// List lists the recordings, the oldest first. A missing directory holds
// none.
func (s *Store) List() ([]Entry, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range ents {
		name, ok := strings.CutSuffix(de.Name(), ext)
		if !ok || !ValidName(name) || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		t, _ := time.Parse("20060102T150405.000Z", name[:len("20060102T150405.000Z")])
		out = append(out, Entry{Name: name, Trigger: name[len("20060102T150405.000Z")+1:], Time: t, Bytes: info.Size()})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Read reads the recording name.
func (s *Store) Read(name string) (*Recording, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%q is not a recording's name", name)
	}
	return ReadFile(filepath.Join(s.Dir, name+ext))
}

// ReadFile reads a recording from a file.
func ReadFile(path string) (*Recording, error) {
	b, err := readCapped(path, maxRecordingBytes+1)
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecordingBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a recording", path, maxRecordingBytes)
	}
	return Decode(b)
}

// Decode decodes a recording, refusing one of a newer format.
func Decode(b []byte) (*Recording, error) {
	var rec Recording
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("not a recording: %w", err)
	}
	if rec.Version == 0 || rec.Version > FormatVersion {
		return nil, fmt.Errorf("recording format %d: this pleg reads up to %d", rec.Version, FormatVersion)
	}
	return &rec, nil
}
