// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/plegkit/pleg"
)

func testSummary(final bool) summary {
	return summary{
		elapsed: 3 * time.Second, final: final, pods: 20, running: 58, exited: 7,
		totals:    map[pleg.EventType]int{pleg.ContainerStarted: 89, pleg.ContainerDied: 14},
		perSecond: map[pleg.EventType]int{pleg.ContainerStarted: 2, pleg.ContainerDied: 1},
		relists:   9, relistP50: 154 * time.Millisecond, relistP99: 248 * time.Millisecond,
		health: "ok",
		mode:   modeLine(pleg.Status{Mode: pleg.ModeAuto, StreamConnected: true, StreamSince: time.Now(), RelistPeriod: time.Second}),
	}
}

// Piped, the demo prints a line a second and the whole summary at the
// end, never the block every second.
func TestDemoPipedPrintsALineASecond(t *testing.T) {
	var out bytes.Buffer
	v := newSummaryView(&out)
	for range 3 {
		v.render(testSummary(false))
	}
	v.render(testSummary(true))
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 3+1+7 || strings.Count(out.String(), "\033") != 0 {
		t.Fatalf("%d lines:\n%s", len(got), out.String())
	}
	for _, line := range got[:3] {
		if !strings.HasPrefix(line, "3s  pods 20  running 58  exited 7  events/s Started 2  Died 1") {
			t.Errorf("line %q", line)
		}
	}
	if got[3] != "" || got[4] != "done for 3s" {
		t.Errorf("final summary:\n%s", strings.Join(got[3:], "\n"))
	}
}

// On a terminal each line is cut to its width, so that none wraps, and
// the redraw goes up exactly the lines the last frame took.
func TestDemoTerminalFitsItsWidth(t *testing.T) {
	var out bytes.Buffer
	v := &summaryView{w: &out, terminal: true, width: 40}
	v.render(testSummary(false))
	first := out.String()
	v.render(testSummary(true))
	second := strings.TrimPrefix(out.String(), first)
	if n := strings.Count(first, "\n"); !strings.HasPrefix(second, "\033[7A\033[J") || n != 7 {
		t.Fatalf("first frame of %d lines, then %q", n, second[:min(len(second), 12)])
	}
	for line := range strings.Lines(strings.TrimPrefix(second, "\033[7A\033[J")) {
		if n := utf8.RuneCountInString(strings.TrimSuffix(line, "\n")); n > 39 {
			t.Errorf("%d columns: %q", n, line)
		}
	}
}

// The mode line never says "reconnected" of a first connection, and
// fits an 80-column terminal.
func TestDemoModeLine(t *testing.T) {
	since := time.Date(2026, 11, 21, 11, 57, 32, 0, time.Local)
	for _, st := range []pleg.Status{
		{Mode: pleg.ModeGeneric, RelistPeriod: time.Second},
		{Mode: pleg.ModeAuto, Evented: true, StreamConnected: true, StreamSince: since, RelistPeriod: 30 * time.Second},
		{Mode: pleg.ModeAuto, NoStream: true, RelistPeriod: time.Second},
		{Mode: pleg.ModeAuto, StreamConnected: true, StreamSince: since, RelistPeriod: time.Second},
		{Mode: pleg.ModeAuto, RelistPeriod: time.Second},
		{Mode: pleg.ModeEvented, StreamSince: since, StreamError: errors.New("EOF"), RelistPeriod: time.Second},
	} {
		line := "  mode        " + modeLine(st)
		if strings.Contains(line, "reconnect") || len(line) > 79 {
			t.Errorf("%+v: %q", st, line)
		}
	}
}
