// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	collogspb "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Compressions.
const (
	CompressionGzip = "gzip"
	CompressionNone = "none"
)

// Client sends one request to a collector.
type Client interface {
	// Export sends req and returns the collector's answer: a partial
	// success's rejected count and message, or an error, an *ExportError
	// when the collector answered.
	Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (rejected int64, msg string, err error)
	Close() error
}

// ExportError is a failed export: whether the OTLP specification calls it
// retryable, and how long the collector asked to wait.
type ExportError struct {
	Retryable  bool
	RetryAfter time.Duration
	// Status is the HTTP status or the gRPC code.
	Status string
	Err    error
}

func (e *ExportError) Error() string {
	kind := "permanent"
	if e.Retryable {
		kind = "retryable"
	}
	return fmt.Sprintf("%s error (%s): %v", kind, e.Status, e.Err)
}

func (e *ExportError) Unwrap() error { return e.Err }

// retryable tells how to treat err: any failure that is not an
// ExportError (a connection refused, a timeout) is retryable.
func retryable(err error) (bool, time.Duration) {
	var ee *ExportError
	if errors.As(err, &ee) {
		return ee.Retryable, ee.RetryAfter
	}
	return true, 0
}

// TransportOptions say how to reach the collector.
type TransportOptions struct {
	// Endpoint: for gRPC host:port (a scheme is allowed and ignored),
	// for HTTP a URL; a URL without a path gets /v1/logs.
	Endpoint string
	// Protocol is ProtocolGRPC (default) or ProtocolHTTP.
	Protocol string
	// Insecure sends in plain text, for a collector on loopback.
	Insecure bool
	// CAFile verifies the collector; default the system's roots.
	CAFile string
	// CertFile and KeyFile authenticate pleg to the collector.
	CertFile, KeyFile string
	// HeadersFile holds headers (one "Name: value" a line, # comments),
	// read at every attempt so that a rotated token is taken; never
	// logged.
	HeadersFile string
	// Compression is CompressionGzip (default) or CompressionNone.
	Compression string
	// Timeout bounds each attempt; default 10 s.
	Timeout time.Duration
}

func (o TransportOptions) validate() error {
	var errs []error
	if o.Endpoint == "" {
		errs = append(errs, errors.New("no endpoint"))
	}
	switch o.Protocol {
	case ProtocolGRPC, ProtocolHTTP:
	default:
		errs = append(errs, fmt.Errorf("protocol %q: want %s or %s", o.Protocol, ProtocolGRPC, ProtocolHTTP))
	}
	switch o.Compression {
	case CompressionGzip, CompressionNone:
	default:
		errs = append(errs, fmt.Errorf("compression %q: want %s or %s", o.Compression, CompressionGzip, CompressionNone))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("a client certificate needs both its certificate and key files"))
	}
	if o.Insecure && (o.CAFile != "" || o.CertFile != "") {
		errs = append(errs, errors.New("insecure (plain text) excludes a CA file and client certificates"))
	}
	if o.Protocol == ProtocolHTTP && o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("endpoint %q: %w", o.Endpoint, err))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, fmt.Errorf("endpoint %q: want an http:// or https:// URL", o.Endpoint))
		case u.Scheme == "http" && !o.Insecure:
			errs = append(errs, fmt.Errorf("endpoint %q is plain text: use https:// or say insecure", o.Endpoint))
		case u.Scheme == "https" && o.Insecure:
			errs = append(errs, fmt.Errorf("endpoint %q is https:// but insecure was asked", o.Endpoint))
		}
	}
	return errors.Join(errs...)
}

func (o TransportOptions) withDefaults() TransportOptions {
	if o.Protocol == "" {
		o.Protocol = ProtocolGRPC
	}
	if o.Compression == "" {
		o.Compression = CompressionGzip
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return o
}

// NewClient returns the client of opts' protocol. Files are read now, to
// fail on a bad one at start, and the headers file again at every
// attempt.
func NewClient(opts TransportOptions) (Client, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if _, err := readHeaders(opts.HeadersFile); err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	if !opts.Insecure {
		var err error
		if tlsCfg, err = tlsConfig(opts); err != nil {
			return nil, err
		}
	}
	if opts.Protocol == ProtocolHTTP {
		return newHTTPClient(opts, tlsCfg), nil
	}
	return newGRPCClient(opts, tlsCfg)
}

func tlsConfig(opts TransportOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", opts.CAFile)
		}
		cfg.RootCAs = pool
	}
	if opts.CertFile != "" {
		// Read at every handshake: a renewed certificate is taken without
		// a restart.
		if _, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile); err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
			return &c, err
		}
	}
	return cfg, nil
}

// maxHeadersFile bounds the headers file.
const maxHeadersFile = 64 << 10

// readHeaders reads "Name: value" lines; blank lines and lines starting
// with # are skipped. Errors name the line, never its value.
func readHeaders(path string) ([][2]string, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("headers file: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out [][2]string
	sc := bufio.NewScanner(io.LimitReader(f, maxHeadersFile))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("headers file %s, line %d: want \"Name: value\"", path, n)
		}
		out = append(out, [2]string{name, value})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("headers file %s: %w", path, err)
	}
	return out, nil
}

// maxRetryAfter bounds the wait a collector can ask for.
const maxRetryAfter = 5 * time.Minute

type httpClient struct {
	opts TransportOptions
	url  string
	hc   *http.Client
}

func newHTTPClient(opts TransportOptions, tlsCfg *tls.Config) *httpClient {
	u, _ := url.Parse(opts.Endpoint) // validated
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.Proxy = nil
	return &httpClient{opts: opts, url: u.String(), hc: &http.Client{Transport: tr, Timeout: opts.Timeout}}
}

func (c *httpClient) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

func (c *httpClient) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (int64, string, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return 0, "", &ExportError{Status: "marshal", Err: err}
	}
	if c.opts.Compression == CompressionGzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body) // a bytes.Buffer does not fail
		_ = zw.Close()
		body = buf.Bytes()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, "", &ExportError{Status: "request", Err: err}
	}
	headers, err := readHeaders(c.opts.HeadersFile)
	if err != nil {
		return 0, "", err // retryable: the file may be being rewritten
	}
	for _, h := range headers {
		hreq.Header.Add(h[0], h[1])
	}
	hreq.Header.Set("Content-Type", "application/x-protobuf")
	hreq.Header.Set("User-Agent", "pleg")
	if c.opts.Compression == CompressionGzip {
		hreq.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusOK {
		var out collogspb.ExportLogsServiceResponse
		if len(rb) > 0 && isProtobuf(resp) {
			if err := proto.Unmarshal(rb, &out); err != nil {
				// Accepted: what it says besides cannot be read.
				return 0, "unreadable response: " + err.Error(), nil
			}
		}
		ps := out.GetPartialSuccess()
		return ps.GetRejectedLogRecords(), ps.GetErrorMessage(), nil
	}
	ee := &ExportError{Status: resp.Status, Err: errors.New(httpErrorMessage(resp, rb))}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		ee.Retryable = true
		ee.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return 0, "", ee
}

// httpErrorMessage is the message of a google.rpc.Status body, or the
// start of a text one.
func httpErrorMessage(resp *http.Response, b []byte) string {
	if isProtobuf(resp) {
		var st spb.Status
		if proto.Unmarshal(b, &st) == nil && st.GetMessage() != "" {
			return st.GetMessage()
		}
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 256 {
		s = s[:256] + "…"
	}
	if s == "" {
		s = "no message"
	}
	return s
}

// isProtobuf tells whether the body is protobuf, parameters allowed.
func isProtobuf(resp *http.Response) bool {
	mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	return strings.TrimSpace(mt) == "application/x-protobuf"
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// exportMethod is the OTLP logs service's Export, called without the
// generated service stubs, which the slim protobuf module leaves out.
const exportMethod = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

type grpcClient struct {
	opts TransportOptions
	conn *grpc.ClientConn
}

func newGRPCClient(opts TransportOptions, tlsCfg *tls.Config) (*grpcClient, error) {
	target := opts.Endpoint
	for _, p := range []string{"http://", "https://", "grpc://"} {
		target = strings.TrimPrefix(target, p)
	}
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds), grpc.WithUserAgent("pleg"))
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", opts.Endpoint, err)
	}
	return &grpcClient{opts: opts, conn: conn}, nil
}

func (c *grpcClient) Close() error { return c.conn.Close() }

func (c *grpcClient) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (int64, string, error) {
	headers, err := readHeaders(c.opts.HeadersFile)
	if err != nil {
		return 0, "", err
	}
	if len(headers) > 0 {
		md := metadata.MD{}
		for _, h := range headers {
			md.Append(strings.ToLower(h[0]), h[1])
		}
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var callOpts []grpc.CallOption
	if c.opts.Compression == CompressionGzip {
		callOpts = append(callOpts, grpc.UseCompressor(grpcgzip.Name))
	}
	var resp collogspb.ExportLogsServiceResponse
	if err := c.conn.Invoke(ctx, exportMethod, req, &resp, callOpts...); err != nil {
		return 0, "", grpcError(err)
	}
	ps := resp.GetPartialSuccess()
	return ps.GetRejectedLogRecords(), ps.GetErrorMessage(), nil
}

// grpcError classifies a gRPC failure as the OTLP specification does:
// ResourceExhausted is retryable only with a RetryInfo, whose delay is
// honoured.
func grpcError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	ee := &ExportError{Status: st.Code().String(), Err: errors.New(st.Message())}
	var info *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			info = ri
		}
	}
	if info != nil {
		ee.RetryAfter = min(max(info.GetRetryDelay().AsDuration(), 0), maxRetryAfter)
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
		ee.Retryable = true
	case codes.ResourceExhausted:
		ee.Retryable = info != nil
	}
	return ee
}

// ValidateTransport checks opts as NewClient would, without reading the
// files.
func ValidateTransport(opts TransportOptions) error { return opts.withDefaults().validate() }
