// Package unixsock opens the unix sockets pleg serves on, the daemon's
// API and the simulated runtime, so that they are safe on a shared node:
// a socket is created with mode 0660 (and a group of choice), a socket
// another process serves is never taken over, and on Close the socket is
// removed only if it is still the one this process created.
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
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, errors.New("exists and is not a socket")
		}
		// The lock is ours, yet a process that does not take it may
		// serve the socket.
		if c, err := net.DialTimeout("unix", path, dialTimeout); err == nil {
			c.Close()
			return nil, errors.New("another process serves it")
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing the stale socket: %w", err)
		}
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Close removes the file itself, and only if it is still ours.
	ul.SetUnlinkOnClose(false)
	// bind(2) creates the file with 0777 less the umask; until the chmod
	// (under the usual umask 022) only its owner may connect.
	err = os.Chmod(path, mode)
	if err == nil && gid >= 0 {
		err = os.Chown(path, -1, gid)
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = os.Stat(path)
	}
	if err != nil {
		ul.Close()
		_ = os.Remove(path)
		return nil, err
	}
	return &Listener{UnixListener: ul, path: path, ours: fi}, nil
}

// Close stops listening, then removes the socket file if it is still the
// one Listen created, and releases the lock. It is idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.close = l.UnixListener.Close()
		if fi, err := os.Stat(l.path); err == nil && os.SameFile(fi, l.ours) {
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
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flock(f); err != nil {
			f.Close()
			return nil, err
		}
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("lock file %s keeps changing", path)
}

// release removes the lock file while it holds the lock, then drops it.
func release(f *os.File, path string) {
	if held, err := f.Stat(); err == nil {
		if named, err := os.Stat(path); err == nil && os.SameFile(held, named) {
			_ = os.Remove(path)
		}
	}
	f.Close()
}
