// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The state directory holds:
//
//	LOCK                 an flock: one daemon per directory
//	head                 the sequence number of the last commit
//	<number>.seg         segments, numbered in the order they were made
//	set-aside/<when>-<why>/   stores moved aside, the newest few
//
// Files are created 0600 in a 0700 directory, never through a symlink: the
// journal names pods, containers and images.

const (
	lockName     = "LOCK"
	headName     = "head"
	segExt       = ".seg"
	setAsideName = "set-aside"
	// keepSetAside is how many set-aside stores are kept for a post-mortem.
	keepSetAside = 3
	headSize     = 16
	headMagic    = "PLGH"
)

// openFile opens a file of the state directory without following a
// symlink.
func openFile(path string, flag int) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
}

// lockDir takes the directory's lock without waiting.
func lockDir(dir string) (*os.File, error) {
	f, err := openFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // only a lock: nothing written
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another pleg", dir)
		}
		return nil, err
	}
	return f, nil
}

// segmentName is the file name of segment number n.
func segmentName(n uint64) string { return fmt.Sprintf("%020d%s", n, segExt) }

// segmentNumber is the number of a segment file name from listSegments.
func segmentNumber(name string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimSuffix(name, segExt), 10, 64)
	return n
}

// listSegments returns the directory's segment names, oldest first.
func listSegments(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), segExt)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := strconv.ParseUint(base, 10, 64); err != nil {
			continue
		}
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names, nil
}

// readHead returns the number the head file holds, if it holds a sound
// one.
func readHead(dir string) (uint64, bool) {
	f, err := openFile(filepath.Join(dir, headName), os.O_RDONLY)
	if err != nil {
		return 0, false
	}
	defer func() { _ = f.Close() }()
	var b [headSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, false
	}
	if string(b[:4]) != headMagic || crc32.Checksum(b[:12], castagnoli) != binary.LittleEndian.Uint32(b[12:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[4:]), true
}

// writeHead records seq in the head file, in place: one write within one
// sector, which a kill cannot tear.
func writeHead(f *os.File, seq uint64) error {
	var b [headSize]byte
	copy(b[:], headMagic)
	binary.LittleEndian.PutUint64(b[4:], seq)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	_, err := f.WriteAt(b[:], 0)
	return err
}

// syncDir makes the directory's entries (a new or removed file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// setAside moves the store's segments and head into a new directory under
// set-aside, named by when and why, and deletes the oldest set-aside
// stores past keepSetAside. It returns where it moved them.
func setAside(dir, stamp, reason string) (string, error) {
	base := filepath.Join(dir, setAsideName)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	// Two stores set aside within a second (a store of another runtime,
	// then a new one of this runtime that is damaged) each keep a name.
	to := filepath.Join(base, stamp+"-"+reason)
	err := os.Mkdir(to, 0o700)
	for n := 2; errors.Is(err, os.ErrExist) && n < 100; n++ {
		to = filepath.Join(base, fmt.Sprintf("%s-%s-%d", stamp, reason, n))
		err = os.Mkdir(to, 0o700)
	}
	if err != nil {
		return "", err
	}
	names, err := listSegments(dir)
	if err != nil {
		return "", err
	}
	for _, n := range append(names, headName) {
		if err := os.Rename(filepath.Join(dir, n), filepath.Join(to, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	if old, err := os.ReadDir(base); err == nil && len(old) > keepSetAside {
		for _, e := range old[:len(old)-keepSetAside] { // ReadDir sorts by name, so by time
			_ = os.RemoveAll(filepath.Join(base, e.Name())) // old set-aside copies: best effort, tried again next time
		}
	}
	return to, syncDir(dir)
}
