// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"context"
	"errors"
	"sync"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
)

// recorderTries is how many times client-go's event recorder writes an
// event before it gives up on it (maxTriesPerEvent in tools/events): the
// sink counts the last failed try as dropped.
const recorderTries = 12

// countingSink is the recorder's sink, counting every write: written,
// retried (the recorder tries again about 10 s later) or dropped (the
// server refused the event, or the recorder gave up on it). It also names
// the node as the events' reportingInstance: client-go's recorder names
// the host, which need not be the node.
type countingSink struct {
	inner    events.EventSink
	count    func(result string)
	instance string

	mu    sync.Mutex
	tries map[string]int // failed tries of each event under way, by name
}

// maxReportingInstance is the longest reportingInstance the API server
// admits (events.k8s.io/v1); a node name may be longer.
const maxReportingInstance = 128

func newCountingSink(inner events.EventSink, count func(string), node string) *countingSink {
	return &countingSink{inner: inner, count: count, instance: node[:min(len(node), maxReportingInstance)],
		tries: make(map[string]int)}
}

// Create names the node as the reporting instance. The recorder hands
// the sink a copy of its event, and a series' later writes are patches of
// its count alone, which leave the created event's instance.
func (s *countingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	e.ReportingInstance = s.instance
	out, err := s.inner.Create(ctx, e)
	s.done(e, err)
	return out, err
}

func (s *countingSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	e.ReportingInstance = s.instance
	out, err := s.inner.Update(ctx, e)
	s.done(e, err)
	return out, err
}

func (s *countingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.inner.Patch(ctx, e, data)
	if apierrors.IsNotFound(err) {
		// The series' first event expired: the recorder creates it anew,
		// and that write counts.
		return out, err
	}
	s.done(e, err)
	return out, err
}

// done counts the outcome of one write of e, the way the recorder treats
// it: an error the server answered (but a conflict of a series) or a
// request that cannot be built is final; anything else is retried.
func (s *countingSink) done(e *eventsv1.Event, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.tries, e.Name)
		s.count(resultWritten)
		return
	}
	final := false
	var badRequest *restclient.RequestConstructionError
	var status *apierrors.StatusError
	switch {
	case errors.As(err, &badRequest):
		final = true
	case errors.As(err, &status):
		final = !apierrors.IsAlreadyExists(err) || e.Series == nil
	}
	if !final {
		s.tries[e.Name]++
		final = s.tries[e.Name] >= recorderTries
	}
	if final {
		delete(s.tries, e.Name)
		s.count(resultDropped)
		return
	}
	s.count(resultRetried)
}
