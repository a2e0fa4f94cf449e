// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package unixsock opens the unix sockets pleg serves on, the daemon's
// API and the simulated runtime, so that they are safe on a shared node:
// a socket appears at its path already with mode 0660 (and a group of
// choice), a socket another process serves is never taken over, no
// symbolic link is followed to create a file, and on Close the socket is
// removed only if it is still the one this process created. PeerUID
// tells who is at the other end of a connection.
//
// A lock file beside the socket, path + ".lock", held with flock(2) for
// the listener's life, says which process owns the path; a socket that
// answers a dial is refused as well, so that a server that does not take
// the lock (an older pleg) is not taken over either. A socket file that
// nobody serves is stale and replaced.
package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// DefaultMode is the mode of a socket file: connecting needs write
// permission, so owner and group may, others may not.
const DefaultMode fs.FileMode = 0o660

// dialTimeout bounds the dial that tells a live socket from a stale one.
const dialTimeout = time.Second

// Options configure Listen.
type Options struct {
	// Mode is the socket file's mode; 0 means DefaultMode.
	Mode fs.FileMode
	// Group, a group name or number, owns the socket file; empty leaves
	// the process's group.
	Group string
}

// Listener is a unix socket listener that owns its path.
type Listener struct {
	*net.UnixListener
	path  string
	lock  *os.File
	ours  fs.FileInfo // the socket file as created
	once  sync.Once
	close error
}

// Listen listens on a unix socket at path, which must be absolute. It
// fails if another process serves path, and replaces a stale socket file;
// any other file at path is left alone and is an error.
func Listen(path string, opts Options) (*Listener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("unix socket %q: want an absolute path", path)
	}
	mode := opts.Mode
	if mode == 0 {
		mode = DefaultMode
	}
	gid := -1
	if opts.Group != "" {
		var err error
		if gid, err = lookupGroup(opts.Group); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	lock, err := acquire(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("unix socket %s: %w", path, err)
	}
	l, err := listen(path, mode, gid)
	if err != nil {
		release(lock, path+".lock")
		return nil, fmt.Errorf("unix socket %s: %w", path, err)
	}
	l.lock = lock
	return l, nil
}

// listen creates the socket at path, replacing a stale one. The caller
// holds the lock.
func listen(path string, mode fs.FileMode, gid int) (*Listener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	// bind(2) creates the file with 0777 less the umask, and a chmod after
	// it leaves a window in which the socket has that mode (under umask 0,
	// anyone may connect). So the socket is bound in a private directory
	// (0700) beside path, given its mode and group there, and renamed to
	// path: path only ever shows the finished socket.
	private, err := os.MkdirTemp(filepath.Dir(path), ".s")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(private) }()
	made := filepath.Join(private, "s")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: made, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Close removes the file itself, and only if it is still ours.
	ul.SetUnlinkOnClose(false)
	err = os.Chmod(made, mode)
	if err == nil && gid >= 0 {
		err = os.Chown(made, -1, gid)
	}
	if err == nil {
		err = os.Rename(made, path)
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = os.Lstat(path)
	}
	if err != nil {
		_ = ul.Close() // never served
		return nil, err
	}
	return &Listener{UnixListener: ul, path: path, ours: fi}, nil
}

// removeStale removes a socket file at path that no process serves, and
// refuses any other file, or a socket that answers.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return errors.New("exists and is not a socket")
	}
	// The lock is ours, yet a process that does not take it may serve the
	// socket.
	if c, err := net.DialTimeout("unix", path, dialTimeout); err == nil {
		_ = c.Close()
		return errors.New("another process serves it")
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale socket: %w", err)
	}
	return nil
}

// Addr returns the socket's path. The kernel keeps the name the socket
// was bound to, in the private directory it was made in, which is gone.
func (l *Listener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close stops listening, then removes the socket file if it is still the
// one Listen created, and releases the lock. It is idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.close = l.UnixListener.Close()
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.ours) {
			if err := os.Remove(l.path); err != nil && l.close == nil {
				l.close = err
			}
		}
		release(l.lock, l.path+".lock")
	})
	return l.close
}

// Path returns the socket's path.
func (l *Listener) Path() string { return l.path }

func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("socket group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// acquire takes the lock file at path, creating it. The file may be
// removed by its previous owner between our open and our flock: then the
// lock we got is on a file nobody else will open, and we try again.
func acquire(path string) (*os.File, error) {
	for range 3 {
		// Never through a symbolic link: root would create or lock any
		// file its target names.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
		if isSymlinkError(err) {
			return nil, fmt.Errorf("lock file %s is a symbolic link: refusing to follow it", path)
		}
		if err != nil {
			return nil, err
		}
		if err := flock(f); err != nil {
			_ = f.Close() // only a lock: nothing written
			return nil, err
		}
		held, err1 := f.Stat()
		named, err2 := os.Lstat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return f, nil
		}
		_ = f.Close() // only a lock: nothing written
	}
	return nil, fmt.Errorf("lock file %s keeps changing", path)
}

// release removes the lock file while it holds the lock, then drops it.
func release(f *os.File, path string) {
	if held, err := f.Stat(); err == nil {
		if named, err := os.Lstat(path); err == nil && os.SameFile(held, named) {
			_ = os.Remove(path)
		}
	}
	_ = f.Close() // only a lock: nothing written
}
