// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plegkit/pleg"
)

// Defaults of Options.
const (
	DefaultMaxStreams          = 64
	DefaultMaxStreamsPerClient = 16
	DefaultWriteTimeout        = 10 * time.Second
	// DefaultPodsTimeout bounds a whole /v1/pods answer: a list of
	// 10,000 pods is read in well under a second on the node.
	DefaultPodsTimeout       = 30 * time.Second
	DefaultKeepAlive         = 15 * time.Second
	DefaultStreamIdleTimeout = 5 * time.Minute
	// DefaultMaxFilterValues bounds the values of one /v1/events query,
	// all filters together.
	DefaultMaxFilterValues = 128
)

// Options configure a Server.
type Options struct {
	// Checks are the health checks of /healthz. /readyz does not run
	// them: readiness says that the server serves, not that what it
	// watches is healthy (see readyz).
	Checks []pleg.HealthCheck
	// Ready, if set, tells whether the server has begun to serve what it
	// is for: /readyz fails until it holds (for the daemon, until the
	// first relist has ended, written or failed). Its error says what is
	// awaited.
	Ready func() (bool, error)
	// Mode, if set, tells how the generator learns of changes: a short
	// word for the X-Pleg-Mode header (generic, evented) and a line for
	// /healthz?verbose.
	Mode func() (word, line string)
	// Details, if set, are more lines for /healthz?verbose, after the
	// mode's: what the runtime can do, say.
	Details func() []string
	// Cache is what /v1/pods reads; required.
	Cache Cache
	// Journal is what /v1/events reads; required.
	Journal EventLog
	// Doctor serves /v1/doctor and /v1/bundle; nil serves neither.
	Doctor Doctor
	// Gatherer serves /metrics; nil serves none.
	Gatherer prometheus.Gatherer
	// Profiling serves Go's profiles under /debug/pprof/.
	Profiling bool
	// MaxStreams caps concurrent /v1/events streams; default 64.
	MaxStreams int
	// MaxStreamsPerClient caps the streams of one client, told by
	// WithClient or else by its IP address; default 16.
	MaxStreamsPerClient int
	// MaxFilterValues caps the filter values of one /v1/events query;
	// default 128.
	MaxFilterValues int
	// WriteTimeout cuts an answer whose client does not take a write
	// within it, a stream's included; every answer but a stream's and
	// a profile's must be written within it too. Default 10 s.
	WriteTimeout time.Duration
	// PodsTimeout bounds a whole /v1/pods answer, however steadily its
	// client reads: each answer holds its snapshot of the cache until it
	// ends. Default 30 s.
	PodsTimeout time.Duration
	// KeepAlive is how often an idle stream writes something, so that
	// proxies keep it and dead clients are found; default 15 s. An NDJSON
	// stream writes an empty line, an SSE stream a comment.
	KeepAlive time.Duration
	// StreamIdleTimeout ends a stream that has sent no event for that
	// long; default 5 min. A client that never reads is found only when
	// the stream's writes fill its buffers, which keep-alives never do:
	// this bounds how long it holds a stream. A client that resumes after
	// its last event loses nothing.
	StreamIdleTimeout time.Duration
	Logger            *slog.Logger
}

// Validate reports every field that NewServer would misread, reading a
// zero field as its default.
func (o Options) Validate() error {
	var errs []error
	if o.Cache == nil {
		errs = append(errs, errors.New("no pod cache to serve /v1/pods from"))
	}
	if o.Journal == nil {
		errs = append(errs, errors.New("no journal to serve /v1/events from"))
	}
	for _, c := range []struct {
		name string
		n    int
	}{
		{"MaxStreams", o.MaxStreams}, {"MaxStreamsPerClient", o.MaxStreamsPerClient},
		{"MaxFilterValues", o.MaxFilterValues},
	} {
		if c.n < 0 {
			errs = append(errs, fmt.Errorf("%s %d must not be negative", c.name, c.n))
		}
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"WriteTimeout", o.WriteTimeout}, {"PodsTimeout", o.PodsTimeout},
		{"KeepAlive", o.KeepAlive}, {"StreamIdleTimeout", o.StreamIdleTimeout},
	} {
		if d.d < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative", d.name, d.d))
		}
	}
	return errors.Join(errs...)
}

// defaulted is o with its unset fields set to their defaults. A negative
// bound, which Validate refuses, is read as unset too: NewServer returns
// no error, and a negative MaxStreams would panic in make.
func (o Options) defaulted() Options {
	defaultInt := func(n *int, def int) {
		if *n <= 0 {
			*n = def
		}
	}
	defaultDuration := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	defaultInt(&o.MaxStreams, DefaultMaxStreams)
	defaultInt(&o.MaxStreamsPerClient, DefaultMaxStreamsPerClient)
	defaultInt(&o.MaxFilterValues, DefaultMaxFilterValues)
	defaultDuration(&o.WriteTimeout, DefaultWriteTimeout)
	defaultDuration(&o.PodsTimeout, DefaultPodsTimeout)
	defaultDuration(&o.KeepAlive, DefaultKeepAlive)
	defaultDuration(&o.StreamIdleTimeout, DefaultStreamIdleTimeout)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
