// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	goruntime "runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds Start from the test helpers; the first run includes
// building the runtime: about five minutes for CRI-O on 2 idle cores, and
// a quarter of an hour for a containerd seen built beside four others on
// a shared, busy machine.
const startTimeout = 30 * time.Minute

// InCI reports whether the environment variable CI is "true": then tests
// that cannot get their runtime fail instead of skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends the test because the runtime spec is unavailable for
// reason err: t.Fatalf when InCI, t.Skipf otherwise.
func Unavailable(t testing.TB, spec Spec, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is required under CI=true but unavailable: %v", spec, err)
	}
	t.Skipf("skipping, %s unavailable (set CI=true to make this a failure): %v", spec, err)
}

// Require starts a private instance of spec for the test, stops it at
// cleanup, and returns it; if the test failed, the cleanup first logs the
// tail of the runtime's log. When the runtime cannot be started (not root,
// no runc, no module proxy...) the test fails under CI=true and is skipped
// elsewhere.
func Require(t testing.TB, spec Spec) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	in, err := Start(ctx, spec, Options{Logf: t.Logf})
	if err != nil {
		Unavailable(t, spec, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log tail:\n%s", spec, in.LogTail(40))
		}
		if err := in.Stop(); err != nil {
			t.Errorf("stopping %s: %v", spec, err)
		}
	})
	return in
}

// RunAllAtOnce raises the number of parallel tests (go test's -parallel,
// GOMAXPROCS by default: 2 on a small machine) to one per runtime of the
// matrix, unless the command line set it: a test on a runtime mostly
// waits on it, so the runtimes of one test may as well run together. Call
// it from TestMain, before m.Run.
func RunAllAtOnce() error {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	specs, err := Matrix()
	if err != nil || set {
		return err
	}
	if n := len(specs) + 1; n > goruntime.GOMAXPROCS(0) {
		return flag.Set("test.parallel", strconv.Itoa(n))
	}
	return nil
}

// Pool shares one instance of each runtime among the tests of a test
// binary: Get starts it on first use, Stop stops them all, from TestMain:
//
//	var runtimes = runtimetest.NewPool()
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		if err := runtimes.Stop(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			code = 1
//		}
//		os.Exit(code)
//	}
//
// Progress goes to the standard error, which `go test` shows only on
// failure or with -v.
type Pool struct {
	mu  sync.Mutex
	all map[Spec]*pooled
}

type pooled struct {
	once sync.Once
	in   *Instance
	err  error
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{all: make(map[Spec]*pooled)} }

// Get returns the pool's instance of spec, starting it if need be, or
// ends the test with Unavailable. At the test's end, if it failed, it logs
// the tail of the runtime's log. Instances of different specs start in
// parallel.
func (p *Pool) Get(t testing.TB, spec Spec) *Instance {
	t.Helper()
	in, err := p.start(spec)
	if err != nil {
		Unavailable(t, spec, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log tail:\n%s", spec, in.LogTail(40))
		}
	})
	return in
}

func (p *Pool) start(spec Spec) (*Instance, error) {
	p.mu.Lock()
	e := p.all[spec]
	if e == nil {
		e = &pooled{}
		p.all[spec] = e
	}
	p.mu.Unlock()
	e.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		l := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
		e.in, e.err = Start(ctx, spec, Options{Logf: func(f string, a ...any) { _ = l.Output(2, fmt.Sprintf(f, a...)) }})
	})
	return e.in, e.err
}

// Stop stops every instance the pool started, all at once.
func (p *Pool) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, 0, len(p.all))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, e := range p.all {
		if e.in != nil {
			wg.Go(func() {
				err := e.in.Stop()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
