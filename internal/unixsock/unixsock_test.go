// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package unixsock

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// serving reports whether a server answers at path, by a connection that
// is accepted and sees one byte.
func serving(t *testing.T, l net.Listener, path string) bool {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()
	s, err := l.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer func() { _ = s.Close() }()
	if _, err := c.Write([]byte("x")); err != nil {
		return false
	}
	b := make([]byte, 1)
	_, err = s.Read(b)
	return err == nil && b[0] == 'x'
}

func TestListenModeAndCleanup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "api.sock")
	l, err := Listen(path, Options{Group: strconv.Itoa(os.Getgid())})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want a socket with 0660", fi.Mode())
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; int(gid) != os.Getgid() {
		t.Errorf("socket group %d, want %d", gid, os.Getgid())
	}
	if !serving(t, l, path) {
		t.Fatal("not serving")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	for _, p := range []string{path, path + ".lock"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind after Close: %v", p, err)
		}
	}
}

// A second server on a live socket fails and leaves the first one serving
// and reachable; once the first closes, a new one may start.
func TestListenNeverTakesOverALiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.sock")
	first, err := Listen(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close() }()
	if _, err := Listen(path, Options{}); err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Fatalf("a second Listen = %v, want refused", err)
	}
	if !serving(t, first, path) {
		t.Fatal("the first server is unreachable after a second one tried")
	}
	_ = first.Close()
	again, err := Listen(path, Options{})
	if err != nil {
		t.Fatalf("Listen after the first closed: %v", err)
	}
	_ = again.Close()
}

// A server that takes no lock (another program, or an older pleg) is
// found by dialling its socket and left alone.
func TestListenRefusesAServerWithoutTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.sock")
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	if _, err := Listen(path, Options{}); err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Fatalf("Listen over a live socket = %v, want refused", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("the other server's socket was removed: %v", err)
	}
	if _, err := os.Lstat(path + ".lock"); !os.IsNotExist(err) {
		t.Errorf("the lock file was left behind: %v", err)
	}
}

func TestListenReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.sock")
	dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	dead.SetUnlinkOnClose(false)
	_ = dead.Close() // a crashed server's socket file
	l, err := Listen(path, Options{})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer func() { _ = l.Close() }()
	if !serving(t, l, path) {
		t.Error("not serving over the stale socket")
	}
}

// Close removes only the socket it created: a file put at the path since
// (by someone who removed ours) stays.
func TestCloseLeavesAnotherFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.sock")
	l, err := Listen(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if data, err := os.ReadFile(path); err != nil || string(data) != "not ours" {
		t.Errorf("Close removed or changed a file it did not create: %q, %v", data, err)
	}
}

func TestListenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, group, want string
	}{
		{path: "relative.sock", want: "want an absolute path"},
		{path: file, want: "exists and is not a socket"},
		{path: filepath.Join(dir, "g.sock"), group: "no-such-group-pleg", want: "socket group"},
	} {
		if _, err := Listen(tc.path, Options{Group: tc.group}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Listen(%q, group %q) = %v, want %q", tc.path, tc.group, err, tc.want)
		}
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "data" {
		t.Errorf("a file at the path was touched: %q %v", data, err)
	}
	if _, err := os.Lstat(file + ".lock"); !os.IsNotExist(err) {
		t.Errorf("a failed Listen left its lock file: %v", err)
	}
}

// The lock file is never opened through a symbolic link: root would
// create, or lock, whatever file the link names.
func TestListenRefusesASymlinkedLockFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.sock")
	existing := filepath.Join(dir, "precious")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "created-by-root")
	for _, target := range []string{existing, missing} {
		if err := os.Symlink(target, path+".lock"); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(path, Options{}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Listen with its lock file linked to %s = %v, want refused", target, err)
		}
		if err := os.Remove(path + ".lock"); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := os.ReadFile(existing); err != nil || string(data) != "keep" {
		t.Errorf("the link's target was touched: %q %v", data, err)
	}
	if _, err := os.Lstat(missing); !os.IsNotExist(err) {
		t.Errorf("the link's missing target was created: %v", err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("a socket was made: %v", err)
	}
}

// PeerUID tells the user of the process that connected, as the kernel
// recorded it.
func TestPeerUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.sock")
	l, err := Listen(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	uid, ok := PeerUID(s)
	if want := os.Getuid(); !ok || int(uid) != want {
		t.Errorf("PeerUID = %d, %v; want %d", uid, ok, want)
	}
	if l.Addr().String() != path {
		t.Errorf("Addr() = %s, want %s", l.Addr(), path)
	}
	if _, ok := PeerUID(&net.TCPConn{}); ok {
		t.Error("PeerUID of a TCP connection told a user")
	}
}
