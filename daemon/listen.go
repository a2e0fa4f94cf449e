package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"

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
	// MaxConnections caps the open connections of one listener; past it,
	// new ones wait in the kernel's accept queue until one closes.
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
	name string // "api" or "metrics", the listener label of the metrics
	lis  net.Listener
	addr string
	srv  *http.Server
}

// newServer serves h on lis within limits, counting its connections in
// conns.
func newServer(name string, lis net.Listener, h http.Handler, limits Limits, conns *prometheus.GaugeVec, log *slog.Logger) *server {
	open := conns.WithLabelValues(name)
	return &server{
		name: name,
		addr: addrOf(lis),
		// Past the cap a connection waits to be accepted, not refused:
		// a probe or a scrape in a burst is served late rather than not.
		lis: netutil.LimitListener(lis, limits.MaxConnections),
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: limits.ReadHeaderTimeout,
			ReadTimeout:       limits.ReadTimeout,
			IdleTimeout:       limits.IdleTimeout,
			MaxHeaderBytes:    limits.MaxHeaderBytes,
			// A client's bad request or failed handshake is the client's
			// to see; at debug level it helps to find a misconfigured one.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
			ConnState: func(_ net.Conn, st http.ConnState) {
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
