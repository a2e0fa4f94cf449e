// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/plegkit/pleg/journal"
)

// eventQuery is a parsed /v1/events query.
type eventQuery struct {
	*Matcher
	f        Filter // what Matcher was made from, kept for the fuzz test
	since    uint64
	hasSince bool
	sse      bool
}

// parseEventQuery parses a /v1/events request, with at most maxValues
// filter values.
func parseEventQuery(r *http.Request, maxValues int) (eventQuery, error) {
	q := eventQuery{sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, fmt.Errorf("query %q does not parse: %w", r.URL.RawQuery, err)
	}
	var f Filter
	for key, vals := range values {
		switch key {
		case "pod":
			f.Pods = append(f.Pods, vals...)
		case "namespace":
			f.Namespaces = append(f.Namespaces, vals...)
		case "type":
			f.Types = append(f.Types, vals...)
		case "since":
			if len(vals) != 1 {
				return q, errors.New("since given more than once")
			}
		default:
			return q, fmt.Errorf("unknown query parameter %q (want pod, namespace, type or since)", key)
		}
	}
	if n := f.values(); n > maxValues {
		return q, fmt.Errorf("%d filter values, more than the %d a query may have", n, maxValues)
	}
	if err := f.Validate(); err != nil {
		return q, err
	}
	q.f, q.Matcher = f, f.Matcher()
	since := values.Get("since")
	if since == "" {
		since = r.Header.Get("Last-Event-ID")
	}
	if since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return q, fmt.Errorf("since %q is not a sequence number", since)
		}
		q.since, q.hasSince = n, true
	}
	return q, nil
}

// clientContextKey keys WithClient's value.
type clientContextKey struct{}

// WithClient returns ctx naming the client of the requests it carries,
// for the per-client stream cap: a server that knows more of a connection
// than its address (the daemon tells a unix socket's peer by user ID)
// sets it in http.Server.ConnContext.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientContextKey{}, client)
}

// clientKey names the client of r for the per-client stream cap: what
// WithClient said, else its IP address, else "local" (a unix socket whose
// server does not tell its peers apart).
func clientKey(r *http.Request) string {
	if client, ok := r.Context().Value(clientContextKey{}).(string); ok && client != "" {
		return client
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return "local"
	}
	return host
}

// acquireStream takes a stream slot for client, or says why not.
func (s *Server) acquireStream(client string) (release func(), refusal string) {
	s.clientsMu.Lock()
	limit := s.opts.MaxStreamsPerClient
	if s.clients[client] >= limit {
		s.clientsMu.Unlock()
		return nil, fmt.Sprintf("%d event streams are open from %s, the most one client may have", limit, client)
	}
	s.clients[client]++
	s.clientsMu.Unlock()
	select {
	case s.streams <- struct{}{}:
	default:
		s.releaseClient(client)
		return nil, fmt.Sprintf("%d event streams are open, the most this server serves", s.opts.MaxStreams)
	}
	return func() {
		<-s.streams
		s.releaseClient(client)
	}, ""
}

func (s *Server) releaseClient(client string) {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	if s.clients[client]--; s.clients[client] <= 0 {
		delete(s.clients, client)
	}
}

// replayBatch is how many events a stream reads from the journal at once.
const replayBatch = 256

// events answers GET /v1/events: a stream, admitted if the server and
// the client have a stream slot left.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventQuery(r, s.opts.MaxFilterValues)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	client := clientKey(r)
	release, refusal := s.acquireStream(client)
	if release == nil {
		writeError(w, http.StatusTooManyRequests, "%s", refusal)
		return
	}
	defer release()
	st := s.openStream(w, r, q, client)
	if err := st.flush(); err != nil {
		return
	}
	st.serve()
}

// eventStream is one client's answer to /v1/events, as it is written.
type eventStream struct {
	s      *Server
	r      *http.Request
	q      eventQuery
	client string
	rc     *http.ResponseController
	bw     *bufio.Writer
	cursor uint64 // the last event read from the journal
}

// openStream writes the answer's headers; the events follow from the
// query's since, else from now on.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, q eventQuery, client string) *eventStream {
	cursor := s.opts.Journal.Last()
	if q.hasSince {
		cursor = q.since
	}
	if q.sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return &eventStream{
		s: s, r: r, q: q, client: client, cursor: cursor,
		rc: http.NewResponseController(w), bw: bufio.NewWriter(w),
	}
}

// flush sends what is buffered, within the server's write timeout.
func (st *eventStream) flush() error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.opts.WriteTimeout))
	if err := st.bw.Flush(); err != nil {
		return err
	}
	return st.rc.Flush()
}

// serve replays the journal from the cursor, then sends each event as it
// is written, until the client goes, the server closes or the stream has
// been idle for StreamIdleTimeout.
func (st *eventStream) serve() {
	opts := &st.s.opts
	keepAlive := time.NewTicker(opts.KeepAlive)
	defer keepAlive.Stop()
	idle := time.NewTimer(opts.StreamIdleTimeout)
	defer idle.Stop()
	for {
		entries, grew := opts.Journal.Read(st.cursor, replayBatch)
		if len(entries) > 0 {
			sent, err := st.send(entries)
			if err != nil {
				return
			}
			if sent {
				idle.Reset(opts.StreamIdleTimeout)
			}
			// A long backlog is replayed batch by batch: a shutdown or a
			// client gone ends it between two.
			if st.ending() {
				return
			}
			continue
		}
		if !st.wait(grew, keepAlive.C, idle.C) {
			return
		}
	}
}

// send writes the entries the query matches and flushes them; it tells
// whether any matched.
func (st *eventStream) send(entries []journal.Entry) (sent bool, err error) {
	for _, e := range entries {
		st.cursor = e.Seq
		ev := NewEntry(e)
		if st.q.Match(&ev) {
			if err := writeEvent(st.bw, &ev, st.q.sse); err != nil {
				return sent, err
			}
			sent = true
		}
	}
	if err := st.flush(); err != nil {
		st.s.opts.Logger.Debug("Event stream client gone or too slow", "client", st.client, "err", err)
		return sent, err
	}
	return sent, nil
}

// ending tells whether the client has gone or the server is closing.
func (st *eventStream) ending() bool {
	select {
	case <-st.r.Context().Done():
		return true
	case <-st.s.closing:
		return true
	default:
		return false
	}
}

// wait waits for the journal to grow, sending a keep-alive when it is
// due; it tells whether the stream goes on.
func (st *eventStream) wait(grew <-chan struct{}, keepAlive <-chan time.Time, idle <-chan time.Time) bool {
	select {
	case <-grew:
		return true
	case <-keepAlive:
		if st.q.sse {
			_, _ = st.bw.WriteString(": keep-alive\n\n")
		} else {
			_, _ = st.bw.WriteString("\n")
		}
		return st.flush() == nil
	case <-idle:
		opts := &st.s.opts
		opts.Logger.Debug("Event stream idle for too long, ended", "client", st.client, "idle", opts.StreamIdleTimeout)
		return false
	case <-st.r.Context().Done():
		return false
	case <-st.s.closing:
		return false
	}
}

// writeEvent writes ev as one NDJSON line, or as one SSE event whose id
// is its sequence number, for Last-Event-ID.
func writeEvent(w *bufio.Writer, ev *Event, sse bool) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if sse {
		// No "event:" field: the type is in the data, and unnamed events
		// reach an EventSource's onmessage.
		_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev.Seq, data)
		return err
	}
	data = append(data, '\n')
	_, err = w.Write(data)
	return err
}
