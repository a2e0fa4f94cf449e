// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/plegkit/pleg/api"
)

// Reconnection backoff of Follow: quick after a short outage, a few
// seconds apart in a long one.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// FollowOptions configure Follow.
type FollowOptions struct {
	EventsRequest
	// Wait is how long to keep trying while the daemon does not answer,
	// at the start or after a drop; 0 keeps trying until ctx ends.
	Wait time.Duration
	// Waiting, if set, is called once when the daemon stops answering (or
	// does not answer at the start), with the first error; Connected is
	// called when a stream opens again after that.
	Waiting   func(err error)
	Connected func()
}

// Follow reads the event stream and calls handle with each event until
// ctx ends (it then returns ctx's error), handle fails, the daemon
// refuses the request, or it has not answered for opts.Wait.
//
// When a stream ends it resumes after the last event read, so that no
// event is missed or repeated. When the daemon cannot resume there (it
// restarted, or the ring moved past that point) it sends a Gap; a daemon
// that refuses the position outright (4xx) is followed from now on, and
// handle gets a Gap from the event after the last one read, without an
// end (To is 0): the client missed it knows not how many events and
// should re-read the pods.
func (c *Client) Follow(ctx context.Context, opts FollowOptions, handle func(api.Event) error) error {
	req := opts.EventsRequest
	backoff := minBackoff
	var down time.Time // when the daemon stopped answering, or zero
	for {
		s, err := c.Events(ctx, req)
		if err == nil {
			if !down.IsZero() && opts.Connected != nil {
				opts.Connected()
			}
			down = time.Time{}
			var read int
			read, err = drain(s, &req.Since, handle)
			var h handlerError
			if errors.As(err, &h) {
				return h.err
			}
			if read > 0 {
				backoff = minBackoff
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var status *StatusError
		if errors.As(err, &status) && !retryable(status.Code) {
			if req.Since == 0 {
				return err
			}
			gap := api.Event{Time: time.Now().UTC(), Type: api.TypeGap, From: req.Since + 1}
			req.Since = 0
			if err := handle(gap); err != nil {
				return err
			}
			continue
		}
		if down.IsZero() && s == nil {
			down = time.Now()
			if opts.Waiting != nil {
				opts.Waiting(err)
			}
		}
		wait := backoff
		if opts.Wait > 0 && !down.IsZero() {
			left := opts.Wait - time.Since(down)
			if left <= 0 {
				return fmt.Errorf("the daemon at %s has not answered for %v: %w", c.server, opts.Wait, err)
			}
			wait = min(wait, left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// handlerError is an error of Follow's handler, which ends Follow.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// drain reads s to its end, moving *since to each event handed over, and
// returns how many it read.
func drain(s *Stream, since *uint64, handle func(api.Event) error) (read int, err error) {
	defer func() { _ = s.Close() }() // a stream read to its end: nothing to lose
	for {
		ev, err := s.Next()
		if err != nil {
			return read, err
		}
		read++
		// The daemon's order, not the largest number: after a restart
		// whose clock stepped back, its numbers start lower.
		switch {
		case ev.Type != api.TypeGap:
			*since = ev.Seq
		case ev.To > 0:
			*since = ev.To
		}
		if err := handle(ev); err != nil {
			return read, handlerError{err}
		}
	}
}

// retryable reports whether a refusal may pass by itself: a daemon too
// busy (429) or failing (5xx). Any other 4xx says the request is wrong.
func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}
