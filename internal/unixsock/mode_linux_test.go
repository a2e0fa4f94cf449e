// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package unixsock

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The socket is never seen at its path with another mode than its own:
// bind(2) gives it 0777 less the umask (anyone may connect under umask 0)
// and a chmod after it would leave a window. The directory's inotify
// events show how the name came to be: renamed there, finished, never
// created there.
func TestSocketAppearsWithItsFinalMode(t *testing.T) {
	old := syscall.Umask(0) // the worst umask: bind(2) would make it 0777
	defer syscall.Umask(old)
	dir := t.TempDir()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Close(fd) }()
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE|syscall.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "api.sock")
	l, err := Listen(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != DefaultMode {
		t.Fatalf("socket %v %v, want mode %v", fi.Mode(), err, DefaultMode)
	}
	created, moved := false, false
	for _, ev := range inotifyEvents(t, fd) {
		if ev.name != "api.sock" {
			continue
		}
		created = created || ev.mask&syscall.IN_CREATE != 0
		moved = moved || ev.mask&syscall.IN_MOVED_TO != 0
	}
	if created || !moved {
		t.Errorf("the socket was created at its path (%v) or not moved there (%v): it was visible before its mode was set", created, moved)
	}
}

type inotifyEvent struct {
	mask uint32
	name string
}

// inotifyEvents reads the events queued on fd.
func inotifyEvents(t *testing.T, fd int) []inotifyEvent {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		t.Fatalf("reading inotify events: %v", err)
	}
	var out []inotifyEvent
	for b := buf[:n]; len(b) >= syscall.SizeofInotifyEvent; {
		mask := binary.NativeEndian.Uint32(b[4:8])
		nameLen := binary.NativeEndian.Uint32(b[12:16])
		name := b[syscall.SizeofInotifyEvent : syscall.SizeofInotifyEvent+int(nameLen)]
		out = append(out, inotifyEvent{mask: mask, name: string(bytes.TrimRight(name, "\x00"))})
		b = b[syscall.SizeofInotifyEvent+int(nameLen):]
	}
	return out
}
