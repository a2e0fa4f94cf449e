// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package safefile writes the files pleg's commands leave behind (doctor's
// pages, bundles, recordings) the one safe way: the commands run as root,
// often into a shared directory such as /tmp, where another user could
// have linked the name to any file.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes the file at path through write, with mode perm, never
// through a symbolic link. The file is written beside path under a name
// of its own and renamed into place: a rename replaces the name, never a
// file it points to, and a write that fails leaves what was at path as it
// was, and no temporary file behind.
func Write(path string, perm fs.FileMode, write func(w io.Writer) error) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSymlink {
		return fmt.Errorf("%s is a symbolic link: refusing to write through it", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	// CreateTemp made it 0600: no one else reads it while it is written.
	err = write(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		err = errors.Join(err, removeTemp(f.Name()))
	}
	return err
}

// removeTemp removes the temporary file of a failed write; one already
// gone is no error.
func removeTemp(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
