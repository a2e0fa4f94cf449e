// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"testing"
	"time"
)

// The connection closed to make room: of the client that holds the most,
// idle first, then the one longest in its state; a connection in a
// request, or yet to send one, only after minHoldToEvict.
func TestConnLimiterVictim(t *testing.T) {
	now := time.Now()
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	type conn struct {
		name, client string
		idle         bool
		since        time.Time
	}
	for _, tc := range []struct {
		name  string
		conns []conn
		want  string        // "" for none
		wait  time.Duration // when want is ""
	}{
		{name: "the idle one of the client holding the most", conns: []conn{
			{"prometheus", "10.0.0.9", true, ago(time.Hour)},
			{"busy", "10.0.0.1", false, ago(time.Minute)},
			{"idle", "10.0.0.1", true, ago(time.Second)},
		}, want: "idle"},
		{name: "the longest idle", conns: []conn{
			{"recent", "10.0.0.1", true, ago(time.Second)},
			{"old", "10.0.0.1", true, ago(time.Minute)},
		}, want: "old"},
		{name: "else the longest in a request or waiting for one", conns: []conn{
			{"slow", "10.0.0.1", false, ago(time.Minute)},
			{"slower", "10.0.0.1", false, ago(time.Hour)},
			{"other", "10.0.0.2", true, ago(time.Hour)},
		}, want: "slower"},
		{name: "not one that just connected", conns: []conn{
			{"new", "10.0.0.1", false, ago(10 * time.Millisecond)},
			{"held", "10.0.0.1", false, ago(time.Second)},
		}, want: "held"},
		{name: "none while every one just connected", conns: []conn{
			{"a", "10.0.0.1", false, ago(100 * time.Millisecond)},
			{"b", "10.0.0.2", false, ago(200 * time.Millisecond)},
		}, wait: minHoldToEvict - 200*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newConnLimiter(nil, len(tc.conns), func() {})
			names := map[*limitedConn]string{}
			for _, c := range tc.conns {
				lc := &limitedConn{l: l, client: c.client, idle: c.idle, since: c.since}
				l.conns[lc] = struct{}{}
				names[lc] = c.name
			}
			got, wait := l.victim(now)
			if names[got] != tc.want || (tc.want == "" && wait != tc.wait) {
				t.Errorf("victim %q, wait %v; want %q, wait %v", names[got], wait, tc.want, tc.wait)
			}
		})
	}
}
