// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command testimg is the only program in the test image used by the
// project's end-to-end tests (see package internal/testing/runtimetest). It is built
// as a static binary (CGO_ENABLED=0) and placed at /testimg in an image whose
// entrypoint is ["/testimg"] and whose default command is ["pause"].
//
// The first argument selects a mode:
//
//	pause                      block until SIGTERM or SIGINT, then exit 0 (the pod sandbox image)
//	sleep <duration>           exit 0 after the Go duration, or at once on SIGTERM/SIGINT
//	exit <code> [<delay>]      exit with code after the optional delay (default 0)
//	crashloop <code> <delay>   the same as exit; the name makes restart tests read well
//	oom [<delay>]              after the optional delay, allocate and touch memory until the OOM killer kills it
//	forks <n>                  start n copies of itself in pause mode, as many as the system lets it, then pause
//
// No argument means pause. In the exit and crashloop modes SIGTERM or SIGINT
// ends the delay early and the program exits with the given code.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"pause"}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	switch mode := args[0]; {
	case mode == "pause" && len(args) == 1:
		fmt.Println("testimg: pause")
		s := <-sig
		fmt.Println("testimg: got", s)
		os.Exit(0)
	case mode == "sleep" && len(args) == 2:
		d, err := time.ParseDuration(args[1])
		if err != nil {
			usage(err)
		}
		fmt.Println("testimg: sleep", d)
		wait(sig, d)
		os.Exit(0)
	case (mode == "exit" && (len(args) == 2 || len(args) == 3)) || (mode == "crashloop" && len(args) == 3):
		code, err := strconv.Atoi(args[1])
		if err != nil || code < 0 || code > 255 {
			usage(fmt.Errorf("bad exit code %q", args[1]))
		}
		var d time.Duration
		if len(args) == 3 {
			if d, err = time.ParseDuration(args[2]); err != nil {
				usage(err)
			}
		}
		fmt.Println("testimg:", mode, code, d)
		wait(sig, d)
		os.Exit(code)
	case mode == "forks" && len(args) == 2:
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 0 {
			usage(fmt.Errorf("bad count %q", args[1]))
		}
		forks(sig, n)
	case mode == "oom" && len(args) <= 2:
		// A delay lets the runtime watch the container's memory before it
		// runs out: containerd 1.7 on cgroup v1 misses an OOM kill that
		// comes before its watch is set, and reports only exit 137 (Error).
		var d time.Duration
		if len(args) == 2 {
			var err error
			if d, err = time.ParseDuration(args[1]); err != nil {
				usage(err)
			}
		}
		fmt.Println("testimg: oom", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case s := <-sig:
			fmt.Println("testimg: got", s)
			os.Exit(0)
		}
		hog(sig)
	default:
		usage(fmt.Errorf("bad arguments %q", args))
	}
}

// wait returns after d or when a signal arrives, whichever is first.
func wait(sig <-chan os.Signal, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case s := <-sig:
		fmt.Println("testimg: got", s)
	}
}

// hog allocates memory a MiB at a time and writes every page of it, so
// that it is charged to the container, until the kernel kills it. Past
// 512 MiB, more than a test's limit, it stops and waits: a container
// without its limit fails its test, not the machine. A signal ends it
// with 0, so a test can tell that the OOM killer did not.
func hog(sig <-chan os.Signal) {
	var held [][]byte
	for len(held) < 512 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
	fmt.Println("testimg: holding", len(held), "MiB and not killed")
	s := <-sig
	fmt.Println("testimg: got", s)
	os.Exit(0)
}

// forks starts n copies of itself, each pausing, until one cannot be
// started (the PIDs have run out), says how many it started and waits;
// a signal ends them all. Its children are bounded by n: a test that
// forgot its PID limit stops at n, not at the machine's.
func forks(sig <-chan os.Signal, n int) {
	self, err := os.Executable()
	if err != nil {
		usage(err)
	}
	var started []*os.Process
	for range n {
		p, err := os.StartProcess(self, []string{self, "pause"}, &os.ProcAttr{})
		if err != nil {
			fmt.Println("testimg: forks: stopped after", len(started), "by", err)
			break
		}
		started = append(started, p)
	}
	fmt.Println("testimg: forks: holding", len(started))
	s := <-sig
	fmt.Println("testimg: got", s)
	for _, p := range started {
		_ = p.Signal(syscall.SIGTERM)
	}
	os.Exit(0)
}

func usage(err error) {
	fmt.Fprintf(
		os.Stderr,
		"testimg: %v\nusage: testimg [pause | sleep <duration> | exit <code> [<delay>] | "+
			"crashloop <code> <delay> | oom [<delay>] | forks <n>]\n",
		err,
	)
	os.Exit(2)
}
