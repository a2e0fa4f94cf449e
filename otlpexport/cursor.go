// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// CursorFile is the file of the state directory that keeps the number
// of the last event the collector accepted.
const CursorFile = "otlp-cursor"

// Cursor keeps the number of the last event the collector accepted.
type Cursor interface {
	// Load returns the saved number for the journal named id, or 0 (read
	// all the journal holds) if none was saved for it.
	Load(id string) (uint64, error)
	// Save records seq for the journal named id.
	Save(id string, seq uint64) error
}

// FileCursor keeps the cursor in a file: "<journal ID> <seq>\n", replaced
// atomically (a temporary file, synced, renamed) and readable by its
// owner only.
type FileCursor struct{ Path string }

// Load reads the file; a missing file, or one of another journal, is 0.
func (c FileCursor) Load(id string) (uint64, error) {
	b, err := os.ReadFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, fmt.Errorf("%s: want \"<journal ID> <seq>\", got %q", c.Path, string(b))
	}
	seq, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.Path, err)
	}
	if fields[0] != id {
		return 0, nil
	}
	return seq, nil
}

// Save replaces the file.
func (c FileCursor) Save(id string, seq uint64) error {
	tmp := c.Path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %d\n", id, seq)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.Path)
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort: rewritten at the next save
		return err
	}
	d, err := os.Open(filepath.Dir(c.Path))
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// MemoryCursor keeps the cursor in memory: a restart exports again what
// the journal holds.
type MemoryCursor struct {
	id  string
	seq uint64
}

// Load returns what Save saved for id.
func (c *MemoryCursor) Load(id string) (uint64, error) {
	if c.id != id {
		return 0, nil
	}
	return c.seq, nil
}

// Save keeps seq.
func (c *MemoryCursor) Save(id string, seq uint64) error {
	c.id, c.seq = id, seq
	return nil
}
