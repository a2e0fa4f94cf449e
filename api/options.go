// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
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
	Cache   Cache
	// Journal is what /v1/events reads.
	Journal EventLog
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
