// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/plegkit/pleg"
)

// fakeProc builds a /proc tree in a directory.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc {
	t.Helper()
	p := &fakeProc{t: t, root: t.TempDir()}
	p.write("stat", "cpu  1 2 3\nbtime 1764158400\n")
	p.write("loadavg", "3.50 2.25 1.00 2/300 4242\n")
	p.write("meminfo", "MemTotal:       16384 kB\nMemFree:        1024 kB\nMemAvailable:    2048 kB\n"+
		"SwapTotal:       4096 kB\nSwapFree:        1024 kB\nDirty:  8 kB\n")
	p.write("pressure/cpu", "some avg10=1.50 avg60=1.00 avg300=0.50 total=100\n")
	p.write("pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	p.write("pressure/io", "some avg10=82.25 avg60=40.00 avg300=10.00 total=99999\nfull avg10=60.00 avg60=30.00 avg300=5.00 total=1\n")
	p.write("net/unix", "Num       RefCount Protocol Flags    Type St Inode Path\n"+
		"0000000000000000: 00000002 00000000 00010000 0001 01 777 /run/containerd/containerd.sock\n")
	p.write("self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"+
		"30 22 0:40 / /mnt/nfs\\040share rw - nfs srv:/x rw\n")
	return p
}

func (p *fakeProc) write(name, content string) {
	p.t.Helper()
	path := filepath.Join(p.root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// process adds a process; socketInode, if not 0, is an open descriptor
// of that socket.
func (p *fakeProc) process(pid, ppid int, comm, state, cmdline, wchan string, socketInode int) {
	p.t.Helper()
	p.processAt(pid, ppid, comm, state, cmdline, wchan, socketInode, 6000)
}

// processAt adds a process started start ticks (1/100 s) after boot.
func (p *fakeProc) processAt(pid, ppid int, comm, state, cmdline, wchan string, socketInode int, start uint64) {
	p.t.Helper()
	dir := strconv.Itoa(pid)
	p.setState(pid, ppid, comm, state, start)
	p.write(dir+"/status", "Name:\t"+comm+"\nVmRSS:\t  2048 kB\n")
	p.write(dir+"/wchan", wchan)
	p.write(dir+"/cmdline", cmdline)
	p.write(dir+"/stack", "[<0>] do_signal_stop+0x1/0x2\n")
	if err := os.MkdirAll(filepath.Join(p.root, dir, "fd"), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if socketInode != 0 {
		if err := os.Symlink(fmt.Sprintf("socket:[%d]", socketInode), filepath.Join(p.root, dir, "fd", "3")); err != nil {
			p.t.Fatal(err)
		}
	}
}

// setState writes a process's stat. Fields 3 on: state ppid pgrp session
// tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
// priority nice threads itrealvalue starttime ...
func (p *fakeProc) setState(pid, ppid int, comm, state string, start uint64) {
	p.t.Helper()
	p.write(strconv.Itoa(pid)+"/stat", fmt.Sprintf("%d (%s) %s %d 1 1 0 -1 0 0 0 0 0 250 150 0 0 20 0 1 0 %d 1000 10\n",
		pid, comm, state, ppid, start))
}

// fakeSource is a generator's status and health, set by the test.
type fakeSource struct {
	st  pleg.Status
	err error
}

func (s *fakeSource) Status() pleg.Status { return s.st }
func (s *fakeSource) Healthy() (bool, error) {
	return s.err == nil, s.err
}

// stepClock is a clock the test moves.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { return c.t }
