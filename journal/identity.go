// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// idName is the file of the state directory that names the journal. It
// is created with the directory and never moved: a store set aside keeps
// its numbers going (the next store starts past the old head), so the ID
// and a sequence number name one event for as long as the directory
// lives.
const idName = "id"

// maxIDLen bounds what is read as an ID: anything longer is not one.
const maxIDLen = 64

// ID is the journal's identity: a random name created with its state
// directory and kept there, or made at Open for a journal in memory,
// including one that cannot write to its directory.
// With a sequence number it names one event across restarts, for a
// consumer downstream to tell duplicates by.
func (j *Journal) ID() string { return j.id }

// loadID reads the directory's ID, creating it if there is none. A
// directory that cannot hold one gives an ID for this run only, with the
// error to log.
func loadID(dir string) (string, error) {
	if dir == "" {
		return newID(), nil
	}
	path := filepath.Join(dir, idName)
	if id, err := readID(path); err == nil {
		return id, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return newID(), err
	}
	id := newID()
	return id, writeFileAtomic(path, []byte(id+"\n"))
}

func readID(path string) (string, error) {
	f, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, maxIDLen+2)
	n, _ := f.Read(buf)
	id := strings.TrimSpace(string(buf[:n]))
	if id == "" || len(id) > maxIDLen || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("%s does not hold a journal ID", path)
	}
	return id, nil
}

// newID is 128 random bits, in base32.
func newID() string { return strings.ToLower(rand.Text()) }

// writeFileAtomic replaces path with data: a temporary file, synced, then
// renamed over it and the directory synced, so that a crash leaves the
// old content or the new, never a part.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := openFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort: a stale temporary file is overwritten next time
		return err
	}
	return syncDir(filepath.Dir(path))
}
