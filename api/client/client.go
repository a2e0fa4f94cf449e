// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package client reads a pleg daemon's HTTP API: its health, its metrics,
// its pods and its event stream, which it follows across dropped
// connections and daemon restarts. It is the one implementation of the
// client side of the protocol that package api serves; `pleg watch
// --server`, `pleg doctor --server` and the end-to-end tests use it.
//
// A daemon is addressed as http://host:port, https://host:port or
// unix:///path/to/socket. Over https the daemon's certificate is checked
// against Options.CAFile (or the system's roots), and a client
// certificate and basic-auth credentials are presented when given: the
// client half of an exporter-toolkit web configuration, the way
// Prometheus scrapes an exporter.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plegkit/pleg/api"
)

// DefaultTimeout bounds each request other than an event stream.
const DefaultTimeout = 10 * time.Second

// maxBody bounds what is read of an answer other than an event stream:
// /v1/pods of 10,000 pods is some 20 MiB.
const maxBody = 64 << 20

// Options configure a Client. The zero value reads a plain http:// or
// unix:// daemon, or an https:// one whose certificate the system trusts.
type Options struct {
	// CAFile holds the PEM certificates that sign the daemon's
	// certificate; default the system's roots.
	CAFile string
	// CertFile and KeyFile are the PEM certificate and key presented to a
	// daemon that asks for a client certificate; both or neither.
	CertFile, KeyFile string
	// ServerName is the name the daemon's certificate is checked against;
	// default the host of the URL.
	ServerName string
	// Username, with Password or PasswordFile (read at each request, so
	// that it can be rotated), authenticates with HTTP basic auth.
	Username     string
	Password     string
	PasswordFile string
	// Timeout bounds each request other than an event stream; default
	// DefaultTimeout.
	Timeout time.Duration
}

// Validate checks the options without reading any file.
func (o Options) Validate() error {
	var errs []error
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("a client certificate needs both its certificate and its key file"))
	}
	if o.Password != "" && o.PasswordFile != "" {
		errs = append(errs, errors.New("a password and a password file are given: choose one"))
	}
	if o.Username == "" && (o.Password != "" || o.PasswordFile != "") {
		errs = append(errs, errors.New("a password is given without a user name"))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v must be positive", o.Timeout))
	}
	return errors.Join(errs...)
}

// tlsOrAuth reports whether the options ask for TLS settings or
// credentials, which a plain http:// or unix:// daemon cannot honour.
func (o Options) tlsOrAuth() (tls, auth bool) {
	return o.CAFile != "" || o.CertFile != "" || o.ServerName != "", o.Username != ""
}

// Client reads one pleg daemon. It is safe for concurrent use.
type Client struct {
	server  string   // as given, for messages
	base    *url.URL // where paths are joined
	http    *http.Client
	timeout time.Duration
}

// New returns a client of the daemon at server: http://host:port,
// https://host:port or unix:///path. It reads the CA and certificate
// files at once, so that a wrong one is an error here and not at the
// first request; it does not connect.
func New(server string, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", server, err)
	}
	base, socket, err := ParseServer(server)
	if err != nil {
		return nil, err
	}
	tlsWanted, auth := opts.tlsOrAuth()
	if tlsWanted && base.Scheme != "https" {
		return nil, fmt.Errorf("%s: TLS settings need an https:// server", server)
	}
	if auth && base.Scheme != "https" && socket == "" && !loopback(base.Hostname()) {
		// Basic auth over plain HTTP across a network gives the password
		// away; a unix socket or the loopback stays on the node.
		return nil, fmt.Errorf(
			"%s: basic auth over plain http:// would send the password in the clear; use https:// or unix://",
			server,
		)
	}
	cfg := promconfig.HTTPClientConfig{
		TLSConfig: promconfig.TLSConfig{
			CAFile: opts.CAFile, CertFile: opts.CertFile, KeyFile: opts.KeyFile, ServerName: opts.ServerName,
		},
		FollowRedirects: false,
		EnableHTTP2:     true,
	}
	if opts.Username != "" {
		cfg.BasicAuth = &promconfig.BasicAuth{
			Username:     opts.Username,
			Password:     promconfig.Secret(opts.Password),
			PasswordFile: opts.PasswordFile,
		}
	}
	var copts []promconfig.HTTPClientOption
	if socket != "" {
		copts = append(copts, promconfig.WithDialContextFunc(func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}))
	}
	rt, err := promconfig.NewRoundTripperFromConfig(cfg, "pleg", copts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", server, err)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return &Client{
		server: server,
		base:   base,
		// No client-wide timeout: it would cut event streams. Requests
		// that end are bounded by timeout through their context.
		http:    &http.Client{Transport: rt, CheckRedirect: noRedirects},
		timeout: timeout,
	}, nil
}

// loopback reports whether host is this machine's loopback.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// noRedirects returns a redirect as it is: a daemon never redirects, and
// following one could carry credentials elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// ParseServer checks a daemon's address and returns the base URL that
// paths are joined to and, for unix://, the socket's path.
func ParseServer(server string) (base *url.URL, socket string, err error) {
	want := "want http://host:port, https://host:port or unix:///path"
	if !strings.Contains(server, "://") {
		return nil, "", fmt.Errorf("server %q has no scheme: %s", server, want)
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, "", fmt.Errorf("server %q: %w", server, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, "", fmt.Errorf("server %q has no host: %s", server, want)
		}
		if u.User != nil {
			return nil, "", fmt.Errorf("server %q: give credentials with the basic-auth options, not in the URL", server)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, "", fmt.Errorf("server %q: a base URL takes no query or fragment", server)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		u.RawPath = ""
		return u, "", nil
	case "unix":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return nil, "", fmt.Errorf("server %q: want unix:///absolute/path", server)
		}
		// The host is never dialled: the transport dials the socket.
		return &url.URL{Scheme: "http", Host: "pleg"}, u.Path, nil
	}
	return nil, "", fmt.Errorf("server %q: scheme %q is not served: %s", server, u.Scheme, want)
}

// String is the daemon's address as given to New.
func (c *Client) String() string { return c.server }

// StatusError is an answer other than the one asked for: its status code
// and the daemon's error message.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// get sends GET path with the Accept header and returns the response when
// its status is one of ok; any other status is a *StatusError. The caller
// closes the body.
func (c *Client) get(
	ctx context.Context,
	path string,
	query url.Values,
	header http.Header,
	ok ...int,
) (*http.Response, error) {
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Not "Get http://pleg/...": a unix socket's URL is made up.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("GET %s: %w", path, ue.Err)
		}
		return nil, err
	}
	for _, code := range ok {
		if resp.StatusCode == code {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, statusError(resp)
}

// statusError reads the error of a response, the daemon's JSON error or
// the start of whatever else came.
func statusError(resp *http.Response) *StatusError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e api.Error
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return &StatusError{resp.StatusCode, e.Error}
	}
	return &StatusError{resp.StatusCode, strings.TrimSpace(string(body))}
}

// read sends GET path and returns the body of a response whose status is
// one of ok, with that status.
func (c *Client) read(ctx context.Context, path, accept string, ok ...int) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.get(ctx, path, nil, http.Header{"Accept": {accept}}, ok...)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		err = fmt.Errorf("%s: answer larger than %d MiB", path, maxBody>>20)
	}
	return resp.StatusCode, body, err
}

// Health is the daemon's answer to /healthz.
type Health struct {
	// OK is the kubelet's meaning: the last relist's list succeeded
	// within the threshold.
	OK bool
	// Message is "ok" or "PLEG is not healthy: <reason>".
	Message string
}

// Health reads /healthz. A 500 is an unhealthy daemon, not an error.
func (c *Client) Health(ctx context.Context) (Health, error) {
	code, body, err := c.read(ctx, "/healthz", "text/plain", http.StatusOK, http.StatusInternalServerError)
	if err != nil {
		return Health{}, err
	}
	return Health{OK: code == http.StatusOK, Message: strings.TrimSpace(string(body))}, nil
}

// Metrics reads and parses /metrics.
func (c *Client) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	text, err := c.MetricsText(ctx)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(text)
}

// MetricsText reads /metrics in the Prometheus text format.
func (c *Client) MetricsText(ctx context.Context) ([]byte, error) {
	_, body, err := c.read(ctx, "/metrics", "text/plain", http.StatusOK)
	return body, err
}

// ParseMetrics parses the Prometheus text format, as /metrics serves it.
func ParseMetrics(text []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return families, nil
}

// Pods reads /v1/pods.
func (c *Client) Pods(ctx context.Context) (api.PodList, error) {
	var l api.PodList
	err := c.readJSON(ctx, "/v1/pods", &l)
	return l, err
}

// Pod reads /v1/pods/{uid}; a pod the daemon does not hold is a
// *StatusError with code 404.
func (c *Client) Pod(ctx context.Context, uid string) (api.Pod, error) {
	var p api.Pod
	err := c.readJSON(ctx, "/v1/pods/"+url.PathEscape(uid), &p)
	return p, err
}

func (c *Client) readJSON(ctx context.Context, path string, v any) error {
	_, body, err := c.read(ctx, path, "application/json", http.StatusOK)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
