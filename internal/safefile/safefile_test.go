// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package safefile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	text := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir, path string)
		perm    os.FileMode
		write   func(io.Writer) error
		wantErr string
		// want is the file's content after the write; mode its mode.
		want string
		mode os.FileMode
	}{
		{name: "new file", perm: 0o644, write: text("page"), want: "page", mode: 0o644},
		{name: "private", perm: 0o600, write: text("bundle"), want: "bundle", mode: 0o600},
		{
			name:    "replaces a file",
			prepare: func(t *testing.T, _, path string) { mustWrite(t, path, "old") },
			perm:    0o644, write: text("new"), want: "new", mode: 0o644,
		},
		{
			name:    "a failed write keeps the old file",
			prepare: func(t *testing.T, _, path string) { mustWrite(t, path, "old") },
			perm:    0o644, write: func(io.Writer) error { return errors.New("render failed") },
			wantErr: "render failed", want: "old", mode: 0o644,
		},
		{
			name: "never through a symbolic link",
			prepare: func(t *testing.T, dir, path string) {
				target := filepath.Join(dir, "target")
				mustWrite(t, target, "precious")
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			},
			perm: 0o644, write: text("overwritten"), wantErr: "symbolic link",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out")
			if tc.prepare != nil {
				tc.prepare(t, dir, path)
			}
			err := Write(path, tc.perm, tc.write)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Write: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Write: %v, want an error with %q", err, tc.wantErr)
			}
			if tc.want != "" {
				got, err := os.ReadFile(path)
				if err != nil || string(got) != tc.want {
					t.Errorf("the file holds %q (%v), want %q", got, err, tc.want)
				}
				if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != tc.mode {
					t.Errorf("the file's mode is %v (%v), want %v", fi.Mode().Perm(), err, tc.mode)
				}
			}
			if b, err := os.ReadFile(filepath.Join(dir, "target")); err == nil && string(b) != "precious" {
				t.Errorf("the link's target was written: %q", b)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("a temporary file was left behind: %s", e.Name())
				}
			}
		})
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
