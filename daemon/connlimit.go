// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/plegkit/pleg/internal/unixsock"
)

// minHoldToEvict is how long a connection that is not idle must have been
// in a request, or waiting to send one, before it may be closed to make
// room: long enough for a request to be read and answered, short enough
// that a probe waits well within the kubelet's 1 s timeout when every
// slot is taken by connections that just opened.
const minHoldToEvict = 300 * time.Millisecond

// connLimiter is a listener that keeps at most max connections open and,
// at the cap, makes room for a new one instead of making it wait in the
// kernel's accept queue behind connections that some client holds: it
// closes a connection of the client that holds the most, the one idle
// longest between requests, else the one longest in a request or waiting
// to send one. A connection that is idle may always be closed (HTTP
// clients expect a keep-alive connection to end); one that is not must
// have been so for minHoldToEvict, so that a burst of requests is served
// rather than cut. While no connection may be closed, the new one waits.
//
// So a client that holds every slot, idle or in slow requests, holds them
// only until someone else connects: the kubelet's probes and Prometheus's
// scrapes get in. A newcomer is never the one closed, and within the
// client that holds the most its oldest go first, so a probe that shares
// that client's address (both on the node's IP) is not closed either.
type connLimiter struct {
	net.Listener
	max     int
	evicted func() // counts a connection closed to make room

	mu      sync.Mutex
	conns   map[*limitedConn]struct{}
	changed chan struct{} // a connection closed or turned idle
	done    chan struct{}
	close   sync.Once
}

func newConnLimiter(lis net.Listener, limit int, evicted func()) *connLimiter {
	return &connLimiter{
		Listener: lis, max: limit, evicted: evicted,
		conns:   make(map[*limitedConn]struct{}),
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

// limitedConn is a connection of a connLimiter, with what the limiter
// chooses by.
type limitedConn struct {
	net.Conn
	l      *connLimiter
	client string
	// Owned by l.mu: whether it is idle between requests, and since when
	// it has been in that state (or in a request, or waiting for one).
	idle  bool
	since time.Time
	once  sync.Once
}

// Accept accepts a connection, first making room for it if the listener
// is at its cap.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l, client: clientOf(c), since: time.Now()}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			return lc, nil
		}
		victim, wait := l.victim(time.Now())
		if victim != nil {
			delete(l.conns, victim)
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			_ = victim.Conn.Close()
			l.evicted()
			return lc, nil
		}
		l.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-l.changed:
		case <-timer.C:
		case <-l.done:
			timer.Stop()
			_ = c.Close() // refused while the listener closes
			return nil, net.ErrClosed
		}
		timer.Stop()
	}
}

// victim picks the connection to close to make room, or says how long
// until one may be closed. The caller holds l.mu.
func (l *connLimiter) victim(now time.Time) (*limitedConn, time.Duration) {
	held := make(map[string]int, 4)
	for c := range l.conns {
		held[c.client]++
	}
	var best *limitedConn
	wait := minHoldToEvict
	better := func(c *limitedConn) bool {
		switch {
		case best == nil:
			return true
		case held[c.client] != held[best.client]:
			return held[c.client] > held[best.client]
		case c.idle != best.idle:
			return c.idle
		default:
			return c.since.Before(best.since)
		}
	}
	for c := range l.conns {
		if !c.idle {
			if held := now.Sub(c.since); held < minHoldToEvict {
				wait = min(wait, minHoldToEvict-held)
				continue
			}
		}
		if better(c) {
			best = c
		}
	}
	return best, wait
}

// setState follows what the HTTP server does with a connection: only a
// connection idle between requests may be closed at once.
func (l *connLimiter) setState(c net.Conn, st http.ConnState) {
	lc, ok := limited(c)
	if !ok {
		return
	}
	if st != http.StateIdle && st != http.StateActive {
		return
	}
	l.mu.Lock()
	lc.idle, lc.since = st == http.StateIdle, time.Now()
	l.mu.Unlock()
	if st == http.StateIdle {
		l.signal()
	}
}

func (l *connLimiter) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Close closes the listener; an Accept waiting for room returns.
func (l *connLimiter) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Close closes the connection and frees its slot.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		c.l.signal()
	})
	return err
}

// limited finds the limitedConn under c, which the HTTP server may have
// wrapped in TLS.
func limited(c net.Conn) (*limitedConn, bool) {
	for {
		switch v := c.(type) {
		case *limitedConn:
			return v, true
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil, false
		}
	}
}

// clientOf names the client at the other end of c, for the bounds that
// hold per client: its IP address, or for a unix socket its user, as the
// kernel tells it ("local" where it does not).
func clientOf(c net.Conn) string {
	if _, ok := c.(*net.UnixConn); ok {
		if uid, ok := unixsock.PeerUID(c); ok {
			return "uid " + strconv.FormatUint(uint64(uid), 10)
		}
		return "local"
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil || host == "" {
		return "local"
	}
	return host
}
