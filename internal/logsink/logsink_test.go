// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package logsink

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// gate is a writer that blocks until opened, as a pipe whose reader
// stopped reading.
type gate struct {
	open chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gate) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

func TestWritesNeverBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{open: make(chan struct{})}
		s := New(g, 100)
		// The first line is taken by the writer, which blocks on it;
		// the next ones wait, up to 100 bytes; the rest are dropped.
		for i := range 30 {
			if n, err := fmt.Fprintf(s, "line %02d\n", i); n != 8 || err != nil {
				t.Fatalf("write %d: %d, %v", i, n, err)
			}
			synctest.Wait()
		}
		if d := s.Dropped(); d != 30-1-12 {
			t.Errorf("dropped %d, want %d (one line written, 12 waiting in 100 bytes)", d, 30-1-12)
		}
		close(g.open)
		synctest.Wait()
		_, _ = fmt.Fprintf(s, "after\n")
		if !s.Close(time.Second) {
			t.Fatal("Close did not drain")
		}
		var want strings.Builder
		for i := range 13 {
			fmt.Fprintf(&want, "line %02d\n", i)
		}
		want.WriteString("pleg: 17 log lines dropped: the log's reader did not keep up\nafter\n")
		if got := g.String(); got != want.String() {
			t.Errorf("written:\n%s\nwant:\n%s", got, want.String())
		}
	})
}

func TestCloseGivesUpOnABlockedWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{open: make(chan struct{})}
		s := New(g, 0)
		_, _ = fmt.Fprintf(s, "stuck\n")
		synctest.Wait()
		if s.Close(5 * time.Second) {
			t.Error("Close reported everything written to a writer that blocks")
		}
		_, _ = fmt.Fprintf(s, "late\n")
		if s.Dropped() != 1 {
			t.Errorf("a write after Close: dropped %d, want 1", s.Dropped())
		}
		close(g.open) // lets the writing goroutine end with the bubble
	})
}
