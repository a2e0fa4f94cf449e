// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/plegkit/pleg/api"
)

// maxEventLine bounds one line of an event stream: an event is a few
// hundred bytes, and a daemon's answer is outside data.
const maxEventLine = 1 << 20

// EventsRequest is what a stream of /v1/events asks for.
type EventsRequest struct {
	// Filter selects the events; a Gap always passes.
	Filter api.Filter
	// Since resumes after this sequence number; 0 starts from now.
	Since uint64
	// SSE asks for Server-Sent Events, resuming with Last-Event-ID as a
	// browser's EventSource does, instead of JSON lines resuming with
	// since=.
	SSE bool
}

// Stream is an open /v1/events stream.
type Stream struct {
	body io.Closer
	sc   *bufio.Scanner
	sse  bool
}

// Events opens a stream of /v1/events. It returns once the daemon has
// answered: a *StatusError if it refused (400 for a bad filter or a
// position it cannot resume from, 429 when it serves its most streams).
// The stream lasts until ctx ends, Close, or the daemon ends it.
func (c *Client) Events(ctx context.Context, r EventsRequest) (*Stream, error) {
	q := r.Filter.Query()
	h := http.Header{"Accept": {"application/x-ndjson"}}
	if r.SSE {
		h.Set("Accept", "text/event-stream")
		if r.Since > 0 {
			h.Set("Last-Event-ID", strconv.FormatUint(r.Since, 10))
		}
	} else if r.Since > 0 {
		q.Set("since", strconv.FormatUint(r.Since, 10))
	}
	//nolint:bodyclose // the Stream returned owns the body: its Close closes it
	resp, err := c.get(ctx, "/v1/events", q, h, http.StatusOK)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEventLine)
	return &Stream{body: resp.Body, sc: sc, sse: r.SSE}, nil
}

// Next returns the next event, skipping keep-alives. At the stream's end
// it returns io.EOF, or the error that ended it.
func (s *Stream) Next() (api.Event, error) {
	if s.sse {
		return s.nextSSE()
	}
	for s.sc.Scan() {
		line := bytes.TrimSpace(s.sc.Bytes())
		if len(line) == 0 {
			continue // keep-alive
		}
		return decode(line)
	}
	return api.Event{}, s.end()
}

// nextSSE reads Server-Sent Events: "data:" lines make an event's data,
// a blank line ends it, ":" starts a comment (the keep-alive); "id:",
// "event:" and "retry:" are not needed, the sequence number being in the
// data.
func (s *Stream) nextSSE() (api.Event, error) {
	var data []byte
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 {
				return decode(data)
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(field) == "data" {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			if len(data)+len(value) > maxEventLine {
				return api.Event{}, fmt.Errorf("event stream: an event's data is over %d bytes", maxEventLine)
			}
			data = append(data, value...)
		}
	}
	return api.Event{}, s.end()
}

func (s *Stream) end() error {
	if err := s.sc.Err(); err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	return io.EOF
}

func decode(data []byte) (api.Event, error) {
	var ev api.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return api.Event{}, fmt.Errorf("event stream: bad event %q: %w", truncate(data, 200), err)
	}
	return ev, nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// Close ends the stream.
func (s *Stream) Close() error { return s.body.Close() }
