// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"compress/gzip"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/slim/otlp/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func request(n int) *collogspb.ExportLogsServiceRequest {
	recs := make([]*logspb.LogRecord, n)
	for i := range recs {
		ev := testEvent(i)
		recs[i] = eventRecord(uint64(i+1), &ev, "node-1", time.Unix(0, 0))
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  Resource{NodeName: "node-1", JournalID: "j1"}.proto(),
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs}},
	}}}
}

func headersFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(p, []byte("# a token\nAuthorization: Bearer s3cret\n\nX-Scope-OrgID: team-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The HTTP client sends protobuf, gzipped, with the file's headers, and
// classifies the answers as the OTLP specification does.
func TestHTTPClient(t *testing.T) {
	hf := headersFile(t)
	for _, tc := range []struct {
		name         string
		status       int
		header       map[string]string
		body         proto.Message
		wantRejected int64
		wantErr      string
		retryable    bool
		retryAfter   time.Duration
	}{
		{name: "accepted", status: 200, body: &collogspb.ExportLogsServiceResponse{}},
		{
			name: "partial success", status: 200, wantRejected: 3,
			body: &collogspb.ExportLogsServiceResponse{PartialSuccess: &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: 3, ErrorMessage: "x"}},
		},
		{name: "429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "7"}, wantErr: "429", retryable: true, retryAfter: 7 * time.Second},
		{name: "502", status: 502, wantErr: "502", retryable: true},
		{name: "503", status: 503, wantErr: "503", retryable: true},
		{name: "504", status: 504, wantErr: "504", retryable: true},
		{name: "400 is permanent", status: 400, wantErr: "400"},
		{name: "401 is permanent", status: 401, wantErr: "401"},
		{name: "500 is permanent", status: 500, wantErr: "500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got collogspb.ExportLogsServiceRequest
			var gotHeader http.Header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotHeader = r.Header
				zr, err := gzip.NewReader(r.Body)
				if err != nil {
					t.Errorf("body not gzip: %v", err)
					return
				}
				b, _ := io.ReadAll(zr)
				if err := proto.Unmarshal(b, &got); err != nil {
					t.Errorf("body: %v", err)
				}
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/x-protobuf")
				w.WriteHeader(tc.status)
				if tc.body != nil {
					out, _ := proto.Marshal(tc.body)
					_, _ = w.Write(out)
				}
			}))
			defer srv.Close()
			c, err := NewClient(TransportOptions{Endpoint: srv.URL, Protocol: ProtocolHTTP, Insecure: true, HeadersFile: hf})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			rejected, _, err := c.Export(context.Background(), request(4))
			checkErr(t, err, tc.wantErr, tc.retryable, tc.retryAfter)
			if rejected != tc.wantRejected {
				t.Errorf("rejected %d, want %d", rejected, tc.wantRejected)
			}
			if n := len(got.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()); n != 4 {
				t.Errorf("the collector got %d records, want 4", n)
			}
			if gotHeader.Get("Authorization") != "Bearer s3cret" || gotHeader.Get("X-Scope-OrgID") != "team-a" ||
				gotHeader.Get("Content-Type") != "application/x-protobuf" {
				t.Errorf("headers %v", gotHeader)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string, retry bool, after time.Duration) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("error %v", err)
		}
		return
	}
	var ee *ExportError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want an ExportError with %q", err, want)
	}
	if ee.Retryable != retry || ee.RetryAfter != after {
		t.Errorf("retryable %v after %v, want %v after %v", ee.Retryable, ee.RetryAfter, retry, after)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the token: %v", err)
	}
}

// logsService is a gRPC LogsService answering from a function.
type logsService struct {
	mu     sync.Mutex
	md     metadata.MD
	answer func(*collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error)
}

func serveLogs(t testing.TB, s *logsService) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "opentelemetry.proto.collector.logs.v1.LogsService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Export",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req collogspb.ExportLogsServiceRequest
				if err := dec(&req); err != nil {
					return nil, err
				}
				md, _ := metadata.FromIncomingContext(ctx)
				s.mu.Lock()
				s.md = md
				s.mu.Unlock()
				return s.answer(&req)
			},
		}},
	}, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func withRetryInfo(code codes.Code, d time.Duration) error {
	st, err := status.New(code, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// The gRPC client calls LogsService/Export with the file's headers as
// metadata and classifies codes as the OTLP specification does.
func TestGRPCClient(t *testing.T) {
	hf := headersFile(t)
	for _, tc := range []struct {
		name         string
		resp         *collogspb.ExportLogsServiceResponse
		err          error
		wantRejected int64
		wantErr      string
		retryable    bool
		retryAfter   time.Duration
	}{
		{name: "accepted", resp: &collogspb.ExportLogsServiceResponse{}},
		{name: "partial success", wantRejected: 2, resp: &collogspb.ExportLogsServiceResponse{
			PartialSuccess: &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: 2},
		}},
		{name: "Unavailable", err: status.Error(codes.Unavailable, "down"), wantErr: "Unavailable", retryable: true},
		{name: "ResourceExhausted without RetryInfo is permanent", err: status.Error(codes.ResourceExhausted, "full"), wantErr: "ResourceExhausted"},
		{name: "ResourceExhausted with RetryInfo", err: withRetryInfo(codes.ResourceExhausted, 3*time.Second), wantErr: "ResourceExhausted", retryable: true, retryAfter: 3 * time.Second},
		{name: "Unavailable with RetryInfo", err: withRetryInfo(codes.Unavailable, time.Second), wantErr: "Unavailable", retryable: true, retryAfter: time.Second},
		{name: "InvalidArgument is permanent", err: status.Error(codes.InvalidArgument, "bad"), wantErr: "InvalidArgument"},
		{name: "Unauthenticated is permanent", err: status.Error(codes.Unauthenticated, "who"), wantErr: "Unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &logsService{answer: func(*collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
				return tc.resp, tc.err
			}}
			addr := serveLogs(t, s)
			c, err := NewClient(TransportOptions{Endpoint: addr, Insecure: true, HeadersFile: hf})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			rejected, _, err := c.Export(context.Background(), request(3))
			checkErr(t, err, tc.wantErr, tc.retryable, tc.retryAfter)
			if rejected != tc.wantRejected {
				t.Errorf("rejected %d, want %d", rejected, tc.wantRejected)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if got := s.md.Get("authorization"); len(got) != 1 || got[0] != "Bearer s3cret" {
				t.Errorf("authorization metadata %v", got)
			}
		})
	}
}

// A collector that is not there is a retryable failure.
func TestNoCollectorIsRetryable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	for _, o := range []TransportOptions{
		{Endpoint: addr, Insecure: true, Timeout: 5 * time.Second},
		{Endpoint: "http://" + addr, Protocol: ProtocolHTTP, Insecure: true, Timeout: 5 * time.Second},
	} {
		c, err := NewClient(o)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Export(context.Background(), request(1))
		if retry, _ := retryable(err); err == nil || !retry {
			t.Errorf("%s: %v, want a retryable error", o.Protocol, err)
		}
		_ = c.Close()
	}
}

// Bad options are told, all at once, before anything is sent.
func TestBadTransportOptions(t *testing.T) {
	for _, tc := range []struct {
		o    TransportOptions
		want string
	}{
		{TransportOptions{}, "no endpoint"},
		{TransportOptions{Endpoint: "x:1", Protocol: "udp"}, `protocol "udp"`},
		{TransportOptions{Endpoint: "x:1", Compression: "zstd"}, `compression "zstd"`},
		{TransportOptions{Endpoint: "x:1", CertFile: "c"}, "both its certificate and key"},
		{TransportOptions{Endpoint: "x:1", Insecure: true, CAFile: "ca"}, "excludes a CA file"},
		{TransportOptions{Endpoint: "http://x:1", Protocol: ProtocolHTTP}, "plain text"},
		{TransportOptions{Endpoint: "x:1", Protocol: ProtocolHTTP}, "want an http:// or https:// URL"},
		{TransportOptions{Endpoint: "x:1", CAFile: "/nonexistent/ca.pem"}, "CA file"},
		{TransportOptions{Endpoint: "x:1", HeadersFile: "/nonexistent/headers"}, "headers file"},
	} {
		c, err := NewClient(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
		if c != nil {
			_ = c.Close()
		}
	}
	p := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(p, []byte("Authorization Bearer s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := readHeaders(p)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad headers line: %v, want line 1 named and its value not shown", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"5", 5 * time.Second}, {"-1", 0}, {"soon", 0}, {"100000", maxRetryAfter},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
	} {
		if got := parseRetryAfter(tc.v, now); got != tc.want {
			t.Errorf("Retry-After %q: %v, want %v", tc.v, got, tc.want)
		}
	}
}

// Over TLS the collector is verified with --otlp-ca-file; a collector
// whose certificate nothing trusts is refused (a transport error, so
// retried and logged until the certificate or the CA is fixed).
func TestHTTPClientTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pemCert(srv.Certificate().Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		caFile string
		ok     bool
	}{
		{"verified by the CA file", ca, true},
		{"unknown authority", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(TransportOptions{Endpoint: srv.URL, Protocol: ProtocolHTTP, CAFile: tc.caFile})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			_, _, err = c.Export(context.Background(), request(1))
			if (err == nil) != tc.ok {
				t.Errorf("error %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// gRPC over TLS, the collector verified by the CA file.
func TestGRPCClientTLS(t *testing.T) {
	// httptest's certificate, valid for 127.0.0.1, serves the gRPC server.
	hs := httptest.NewTLSServer(http.NotFoundHandler())
	cert := hs.TLS.Certificates[0]
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pemCert(hs.Certificate().Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	hs.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	s := &logsService{answer: func(*collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
		return &collogspb.ExportLogsServiceResponse{}, nil
	}}
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "opentelemetry.proto.collector.logs.v1.LogsService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Export", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req collogspb.ExportLogsServiceRequest
			if err := dec(&req); err != nil {
				return nil, err
			}
			return s.answer(&req)
		}}},
	}, s)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	for _, tc := range []struct {
		name   string
		caFile string
		ok     bool
	}{
		{"verified by the CA file", ca, true},
		{"unknown authority", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(TransportOptions{Endpoint: lis.Addr().String(), CAFile: tc.caFile, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			_, _, err = c.Export(context.Background(), request(1))
			if (err == nil) != tc.ok {
				t.Errorf("error %v, want ok %v", err, tc.ok)
			}
		})
	}
}
