// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubeletpleg

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// kubeletText is a kubelet's /metrics with its PLEG series among others:
// n relists, most under 5 ms and slow ones over 10 s, its PLEG last seen
// at lastSeen.
func kubeletText(lastSeen float64, fast, slow uint64) string {
	var b strings.Builder
	b.WriteString("# HELP apiserver_audit_event_total [ALPHA] Counter of audit events generated and sent to the audit backend.\n")
	b.WriteString("# TYPE apiserver_audit_event_total counter\napiserver_audit_event_total 0\n")
	b.WriteString("# HELP kubelet_pleg_discard_events [ALPHA] The number of discard events in PLEG.\n")
	b.WriteString("# TYPE kubelet_pleg_discard_events counter\nkubelet_pleg_discard_events 0\n")
	fmt.Fprintf(&b, "# HELP kubelet_pleg_last_seen_seconds [ALPHA] Timestamp in seconds when PLEG was last seen active.\n"+
		"# TYPE kubelet_pleg_last_seen_seconds gauge\nkubelet_pleg_last_seen_seconds %g\n", lastSeen)
	for _, name := range []string{"kubelet_pleg_relist_duration_seconds", "kubelet_pleg_relist_interval_seconds"} {
		fmt.Fprintf(&b, "# HELP %s [ALPHA] Duration in seconds.\n# TYPE %s histogram\n", name, name)
		for _, le := range []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"} {
			fmt.Fprintf(&b, "%s_bucket{le=%q} %d\n", name, le, fast)
		}
		fmt.Fprintf(&b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, fast+slow, name,
			float64(fast)*0.003+float64(slow)*20, name, fast+slow)
	}
	// A family this package does not read, malformed: it must not matter.
	b.WriteString("rest_client_requests_total{code=\"200\" 12\n")
	return b.String()
}

// fakeKubelet serves text at /metrics to requests with the token, as a
// kubelet authorizes nodes/metrics; hold, if set, delays the answer until
// the request ends.
type fakeKubelet struct {
	mu    sync.Mutex
	text  string
	token string
	hold  bool
	paths []string
}

func (k *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	text, token, hold := k.text, k.token, k.hold
	k.paths = append(k.paths, r.URL.Path)
	k.mu.Unlock()
	if hold {
		<-r.Context().Done()
		return
	}
	switch r.Header.Get("Authorization") {
	case "Bearer " + token:
	case "":
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	default:
		http.Error(w, `Forbidden (user=system:serviceaccount:pleg:pleg, verb=get, resource=nodes, subresource(s)=[metrics])`,
			http.StatusForbidden)
		return
	}
	if !strings.HasSuffix(r.URL.Path, "/metrics") {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write([]byte(text))
}

func (k *fakeKubelet) set(f func(k *fakeKubelet)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f(k)
}

// writeFile writes content into a file of the test's.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serverCA writes the test server's certificate as a CA file.
func serverCA(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return writeFile(t, "ca.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE",
		Bytes: srv.Certificate().Raw})))
}

func TestRead(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := &fakeKubelet{token: "secret", text: kubeletText(1_800_000_000-95.5, 980, 20)}
	srv := httptest.NewTLSServer(k)
	defer srv.Close()
	ca := serverCA(t, srv)
	token := writeFile(t, "token", "secret\n")
	for _, tc := range []struct {
		name string
		opts DirectOptions
		text string
		hold bool
		want string // in the error, or "" for a good read
	}{
		{name: "a service account token, the kubelet's CA", opts: DirectOptions{URL: srv.URL, TokenFile: token, CAFile: ca}},
		{name: "certificate not verified", opts: DirectOptions{URL: srv.URL + "/metrics", TokenFile: token, InsecureSkipVerify: true}},
		{name: "a kubeconfig's token", opts: DirectOptions{URL: srv.URL, CAFile: ca,
			Credentials: &rest.Config{Host: "https://apiserver", BearerToken: "secret",
				TLSClientConfig: rest.TLSClientConfig{CAData: []byte("the API server's, not the kubelet's")}}}},
		{name: "the kubelet's certificate not trusted", opts: DirectOptions{URL: srv.URL, TokenFile: token},
			want: "certificate"},
		{name: "no credential", opts: DirectOptions{URL: srv.URL, CAFile: ca}, want: "401 Unauthorized"},
		{name: "a token without nodes/metrics", opts: DirectOptions{URL: srv.URL, CAFile: ca,
			TokenFile: writeFile(t, "other", "other")}, want: "403 Forbidden: the credential may not get nodes/metrics"},
		{name: "not a kubelet", opts: DirectOptions{URL: srv.URL, TokenFile: token, CAFile: ca},
			text: "# TYPE up gauge\nup 1\n", want: "have no kubelet_pleg_last_seen_seconds nor kubelet_pleg_relist_duration_seconds"},
		{name: "garbage", opts: DirectOptions{URL: srv.URL, TokenFile: token, CAFile: ca},
			text: "kubelet_pleg_last_seen_seconds{ 12 zz\n\x00\xff", want: "parsing the kubelet's metrics"},
		{name: "a kubelet that does not answer", opts: DirectOptions{URL: srv.URL, TokenFile: token, CAFile: ca},
			hold: true, want: "no answer within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k.set(func(k *fakeKubelet) {
				k.text, k.hold = kubeletText(1_800_000_000-95.5, 980, 20), tc.hold
				if tc.text != "" {
					k.text = tc.text
				}
			})
			f, err := NewDirect(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			// A generous timeout but where the kubelet holds its answer: a
			// TLS handshake under the race detector on a busy machine takes
			// hundreds of milliseconds.
			timeout := 10 * time.Second
			if tc.hold {
				timeout = 300 * time.Millisecond
			}
			r := New(f, Options{Timeout: timeout, Now: func() time.Time { return now }})
			got := r.Read(context.Background())
			if tc.want != "" {
				if !strings.Contains(got.Error, tc.want) {
					t.Errorf("error %q, want %q", got.Error, tc.want)
				}
				return
			}
			if got.Error != "" {
				t.Fatal(got.Error)
			}
			if got.LastSeenAgeSeconds != 95.5 || !got.LastSeen.Equal(now.Add(-95500*time.Millisecond)) {
				t.Errorf("last seen %v, %v s ago; want 95.5 s ago", got.LastSeen, got.LastSeenAgeSeconds)
			}
			if got.Relists.Count != 1000 || got.Relists.P50Seconds > 0.005 || got.Relists.P99Seconds != 10 || !got.Relists.Beyond {
				t.Errorf("relists %+v: want 1000, p50 within 5 ms, p99 beyond 10 s", got.Relists)
			}
			if got.Intervals.Count != 1000 || got.RecentRelists != nil {
				t.Errorf("intervals %+v, recent %+v", got.Intervals, got.RecentRelists)
			}
			if !strings.HasPrefix(got.Source, "https://127.0.0.1:") || !strings.HasSuffix(strings.Fields(got.Source)[0], "/metrics") {
				t.Errorf("source %q", got.Source)
			}
		})
	}
}

// The recent quantiles are those of the relists between two reads: a
// kubelet fast since its start whose relists turned slow shows it at
// once; a kubelet that restarted between them gives none.
func TestRecentRelists(t *testing.T) {
	k := &fakeKubelet{token: "t", text: kubeletText(100, 10000, 0)}
	srv := httptest.NewTLSServer(k)
	defer srv.Close()
	f, err := NewDirect(DirectOptions{URL: srv.URL, TokenFile: writeFile(t, "token", "t"), InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(200, 0)
	r := New(f, Options{Now: func() time.Time { return clock }})
	if first := r.Read(t.Context()); first.Error != "" || first.RecentRelists != nil {
		t.Fatalf("first read: %+v", first)
	}
	k.set(func(k *fakeKubelet) { k.text = kubeletText(100, 10010, 5) })
	clock = clock.Add(30 * time.Second)
	second := r.Read(t.Context())
	if second.Relists.P99Seconds >= 0.005 {
		t.Errorf("since start p99 %v: want the fast relists' (10,000 of 10,015)", second.Relists.P99Seconds)
	}
	if rr := second.RecentRelists; rr == nil || rr.Count != 15 || rr.P99Seconds != 10 || !rr.Beyond ||
		second.RecentSinceSeconds != 30 {
		t.Errorf("recent relists %+v over %v s: want 15, p99 beyond 10 s, over 30 s", rr, second.RecentSinceSeconds)
	}
	k.set(func(k *fakeKubelet) { k.text = kubeletText(100, 3, 0) })
	if third := r.Read(t.Context()); third.RecentRelists != nil {
		t.Errorf("after the kubelet restarted: recent %+v, want none", third.RecentRelists)
	}
}

func TestProxy(t *testing.T) {
	k := &fakeKubelet{token: "admin", text: kubeletText(100, 10, 0)}
	srv := httptest.NewTLSServer(k)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "admin",
		TLSClientConfig: rest.TLSClientConfig{CAFile: serverCA(t, srv)}}
	f, err := NewProxy(cfg, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	got := New(f, Options{}).Read(t.Context())
	if got.Error != "" || got.Relists.Count != 10 {
		t.Fatalf("%+v", got)
	}
	if k.paths[0] != "/api/v1/nodes/node-1/proxy/metrics" || !strings.Contains(got.Source, "node proxy") {
		t.Errorf("asked %v, source %q", k.paths, got.Source)
	}
	if _, err := NewProxy(cfg, ""); err == nil {
		t.Error("no node name: want an error")
	}
}

func TestBadURLs(t *testing.T) {
	for _, u := range []string{"", "10.0.0.1:10250", "ftp://x", "://"} {
		if _, err := NewDirect(DirectOptions{URL: u}); err == nil {
			t.Errorf("%q: want an error", u)
		}
	}
	if _, err := NewDirect(DirectOptions{URL: "http://127.0.0.1:10255", TokenFile: "/x"}); err == nil ||
		!strings.Contains(err.Error(), "in clear") {
		t.Errorf("a token over http: %v", err)
	}
}

// Parse keeps only the three families: the rest of a kubelet's thousands
// of series, malformed or not, cannot fail it.
func FuzzParse(f *testing.F) {
	f.Add([]byte(kubeletText(100, 10, 2)))
	f.Add([]byte("kubelet_pleg_last_seen_seconds NaN\nkubelet_pleg_relist_duration_seconds_bucket{le=\"x\"} 1\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		fams, err := Parse(text)
		if err != nil {
			return
		}
		rd := Reading{ReadAt: time.Unix(1000, 0)}
		rd.fill(fams) // must not panic
		if rd.LastSeenAgeSeconds < 0 || rd.Relists.P99Seconds < 0 {
			t.Errorf("negative figures %+v", rd)
		}
	})
}

// A kubelet whose EventedPLEG stream has connected relists every 5
// minutes against 10: pleg judges its last-seen by those, whichever way
// the kubelet's metrics spell the counter.
func TestEvented(t *testing.T) {
	const base = "kubelet_pleg_last_seen_seconds 1.8e+09\n"
	for _, tc := range []struct {
		name        string
		text        string
		evented     bool
		behindAfter time.Duration
	}{
		{name: "generic", text: base, behindAfter: 90 * time.Second},
		{name: "the gate on, no stream yet", behindAfter: 90 * time.Second,
			text: base + "# TYPE kubelet_evented_pleg_connection_success_count counter\nkubelet_evented_pleg_connection_success_count 0\n"},
		{name: "evented", evented: true, behindAfter: 450 * time.Second,
			text: base + "# TYPE kubelet_evented_pleg_connection_success_count counter\nkubelet_evented_pleg_connection_success_count 2\n"},
		{name: "evented, _total", evented: true, behindAfter: 450 * time.Second,
			text: base + "# TYPE kubelet_evented_pleg_connection_success_count_total counter\n" +
				"kubelet_evented_pleg_connection_success_count_total 1\n"},
		{name: "a longer name is another metric", behindAfter: 90 * time.Second,
			text: base + "kubelet_evented_pleg_connection_success_count_other 3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fams, err := Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			var r Reading
			r.fill(fams)
			if r.Evented != tc.evented || r.BehindAfter() != tc.behindAfter {
				t.Errorf("evented %v, behind after %v; want %v, %v", r.Evented, r.BehindAfter(), tc.evented, tc.behindAfter)
			}
			wantThreshold := map[bool]time.Duration{false: 3 * time.Minute, true: 10 * time.Minute}[tc.evented]
			if r.Threshold() != wantThreshold {
				t.Errorf("threshold %v, want %v", r.Threshold(), wantThreshold)
			}
		})
	}
}
