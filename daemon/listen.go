// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/internal/unixsock"
)

// Defaults of Limits.
const (
	DefaultMaxConnections    = 256
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// Limits bound what clients can hold of each listener; a zero field takes
// its default. Event streams have their own bounds (Config.MaxStreams and
// the others): these are the connections under them.
type Limits struct {
	// MaxConnections caps the open connections of one listener. At the
	// cap a new connection makes room: the client holding the most loses
	// one, idle first (see connLimiter).
	MaxConnections int
	// ReadHeaderTimeout and ReadTimeout bound reading a request's header
	// and the whole request. Neither cuts an event stream: the server
	// answers GETs, whose requests end with their header.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// IdleTimeout closes a keep-alive connection that sends no request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request line and header, the query
	// included.
	MaxHeaderBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxConnections == 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.ReadTimeout == 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l
}

// Listen opens host:port, or a unix socket for unix:///path: mode 0660,
// owned by group if one is named, never one another process serves (see
// internal/unixsock).
func Listen(addr, group string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("listen address %q: want unix:///absolute/path", addr)
		}
		lis, err := unixsock.Listen(path, unixsock.Options{Group: group})
		if err != nil {
			return nil, err // it names the socket
		}
		return lis, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("listen address %q: want host:port or unix:///path: %w", addr, err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return lis, nil
}

// addrOf is a listener's address as a flag would give it.
func addrOf(lis net.Listener) string {
	if lis.Addr().Network() == "unix" {
		return "unix://" + lis.Addr().String()
	}
	return lis.Addr().String()
}

// loopback reports whether a listener only faces this host: a unix
// socket, or a loopback address.
func loopback(lis net.Listener) bool {
	switch a := lis.Addr().(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}

// server is one listener and the HTTP server on it.
type server struct {
	name string // "api", "metrics" or "diagnosis", the listener label of the metrics
	lis  net.Listener
	addr string
	srv  *http.Server
}

// connMetrics count a listener's connections.
type connMetrics struct {
	open    *prometheus.GaugeVec   // pleg_http_connections
	evicted *prometheus.CounterVec // pleg_http_connections_evicted_total
}

func newConnMetrics(reg prometheus.Registerer) (connMetrics, error) {
	m := connMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pleg_http_connections",
			Help: "Open connections to the daemon's HTTP listener: api (every path) or metrics (/metrics and the probes).",
		}, []string{"listener"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_http_connections_evicted_total",
			Help: "Connections closed to make room for a new one, the listener being at --max-connections: " +
				"a client that holds many connections, or too low a cap.",
		}, []string{"listener"}),
	}
	for _, c := range []prometheus.Collector{m.open, m.evicted} {
		if err := reg.Register(c); err != nil {
			return m, err
		}
	}
	return m, nil
}

// newServer serves h on lis within limits, counting its connections.
func newServer(name string, lis net.Listener, h http.Handler, limits Limits, m connMetrics, log *slog.Logger) *server {
	open, evicted := m.open.WithLabelValues(name), m.evicted.WithLabelValues(name)
	evicted.Add(0)
	limiter := newConnLimiter(lis, limits.MaxConnections, evicted.Inc)
	return &server{
		name: name,
		addr: addrOf(lis),
		lis:  limiter,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: limits.ReadHeaderTimeout,
			ReadTimeout:       limits.ReadTimeout,
			IdleTimeout:       limits.IdleTimeout,
			MaxHeaderBytes:    limits.MaxHeaderBytes,
			// A client's bad request or failed handshake is the client's
			// to see; at debug level it helps to find a misconfigured one.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
			// The per-client bounds of the API (streams) count by the
			// client the limiter told: an IP address, or a user on a
			// unix socket.
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				if lc, ok := limited(c); ok {
					return api.WithClient(ctx, lc.client)
				}
				return ctx
			},
			ConnState: func(c net.Conn, st http.ConnState) {
				limiter.setState(c, st)
				switch st {
				case http.StateNew:
					open.Inc()
				case http.StateClosed, http.StateHijacked:
					open.Dec()
				}
			},
		},
	}
}

// serve serves until the server is shut down, with TLS and
// authentication as the web config file says (none if it is empty).
func (s *server) serve(webConfig string, log *slog.Logger) error {
	systemd := false
	err := web.Serve(s.lis, s.srv, &web.FlagConfig{
		WebListenAddresses: &[]string{s.addr},
		WebSystemdSocket:   &systemd,
		WebConfigFile:      &webConfig,
	}, log.With("listener", s.name))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
