// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// logLines is how much of a process's output is kept, for the report of
// a failure.
const logLines = 40

// process is a child process of the fleet: a simulated runtime or a pleg
// daemon.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// stopping tells that the harness is stopping it: its end is no
	// failure.
	stopping atomic.Bool

	mu   sync.Mutex
	tail []string
	// serving receives the --metrics-listen address once pleg run logs
	// that it serves.
	serving chan string
}

// startProcess starts bin with args; its output is kept, the last lines
// of it, and watched for pleg's "Serving" line.
func startProcess(name, bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	// Should the test binary die, its fleet dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), serving: make(chan string, 1)}
	go p.read(out)
	return p, nil
}

func (p *process) read(r io.Reader) {
	defer func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > logLines {
			p.tail = p.tail[len(p.tail)-logLines:]
		}
		p.mu.Unlock()
		var entry struct {
			Msg     string `json:"msg"`
			Metrics string `json:"metrics"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "Serving the PLEG API" && entry.Metrics != "" {
			select {
			case p.serving <- entry.Metrics:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// logTail is the last lines the process wrote.
func (p *process) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("%s exited: %w\n%s", p.name, p.err, p.logTail())
	}
	return p.cmd.Process.Signal(sig)
}

// stop ends the process: SIGCONT (it may be frozen) and SIGTERM, then
// SIGKILL after within.
func (p *process) stop(within time.Duration) error {
	p.stopping.Store(true)
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop on SIGTERM within %v; killed\n%s", p.name, within, p.logTail())
	}
}

// usage is a process's CPU time so far and its resident memory now, from
// /proc.
type usage struct {
	cpu time.Duration
	rss int64 // bytes
}

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

func (p *process) usage() (usage, error) {
	pid := strconv.Itoa(p.cmd.Process.Pid)
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return usage{}, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from after it. utime and stime are fields 14 and 15.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return usage{}, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return usage{}, fmt.Errorf("/proc/%s/stat: %w", pid, err)
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return usage{}, err
	}
	var rssKiB int64
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKiB, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return usage{}, fmt.Errorf("/proc/%s/status: VmRSS %q", pid, v)
			}
		}
	}
	return usage{cpu: time.Duration(utime+stime) * clockTick, rss: rssKiB << 10}, nil
}
