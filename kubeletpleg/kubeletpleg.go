// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubeletpleg reads the kubelet's own PLEG from its metrics: when
// its PLEG was last seen active (kubelet_pleg_last_seen_seconds) and how
// long its relists take and how far apart they come
// (kubelet_pleg_relist_duration_seconds and
// kubelet_pleg_relist_interval_seconds), so that pleg can tell a kubelet
// whose PLEG falls behind while the runtime answers quickly: the kubelet
// itself is starved or stuck, not the runtime.
//
// The metrics are read from the kubelet's authenticated port
// (https://NODE:10250/metrics, which the kubelet authorizes as get on
// nodes/metrics, the least a reader needs) with a bearer token or a
// kubeconfig's credentials, or through the API server's node proxy
// (/api/v1/nodes/NODE/proxy/metrics, which needs get on nodes/proxy: that
// also lets its holder run commands in every pod of the node through the
// kubelet's API, so the direct port is preferred where it can be
// reached). Nothing is written anywhere.
package kubeletpleg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/plegkit/pleg/metrics"
)

// The kubelet's metric names this package reads.
const (
	LastSeenMetric       = "kubelet_pleg_last_seen_seconds"
	RelistDurationMetric = "kubelet_pleg_relist_duration_seconds"
	RelistIntervalMetric = "kubelet_pleg_relist_interval_seconds"
	// EventedMetric counts the kubelet's EventedPLEG stream connections:
	// a kubelet that has one runs EventedPLEG.
	EventedMetric = "kubelet_evented_pleg_connection_success_count"
)

// The kubelet's own PLEG's timing, which it does not let anyone change:
// its generic PLEG relists every second and reports PLEG not healthy
// when its last relist is 3 minutes old; with EventedPLEG on, the generic
// PLEG relists every 5 minutes, against 10.
const (
	RelistPeriod           = time.Second
	RelistThreshold        = 3 * time.Minute
	EventedRelistPeriod    = 5 * time.Minute
	EventedRelistThreshold = 10 * time.Minute
)

// DefaultTimeout bounds one read: a kubelet that does not answer its
// metrics within it is itself a finding (starved, or stuck), not a wait.
const DefaultTimeout = 5 * time.Second

// MaxBytes bounds the metrics text read: a kubelet's whole /metrics is a
// few MiB at most; anything larger is not one.
const MaxBytes = 32 << 20

// Source is what reads the kubelet's PLEG: a *Reader, or a test's fake.
// The daemon and pleg doctor take one.
type Source interface {
	// Read reads the kubelet's PLEG now. It never fails: what went wrong
	// is in the Reading's Error.
	Read(ctx context.Context) Reading
}

// Reading is one read of the kubelet's PLEG metrics.
type Reading struct {
	// Source says where the metrics were read: the kubelet's URL, or the
	// API server's node proxy.
	Source string `json:"source"`
	// ReadAt is when the read started, TookSeconds how long it took.
	ReadAt      time.Time `json:"readAt"`
	TookSeconds float64   `json:"tookSeconds"`
	// Error says why nothing (or not everything) could be read; the
	// figures below are then zero.
	Error string `json:"error,omitempty"`
	// LastSeen is kubelet_pleg_last_seen_seconds: when the kubelet's
	// PLEG was last seen active (the start of its last relist that got
	// past its lists, as of the kubelet's last health check). Zero when
	// the kubelet has not set it yet.
	LastSeen time.Time `json:"lastSeen,omitzero"`
	// LastSeenAgeSeconds is LastSeen's age at ReadAt.
	LastSeenAgeSeconds float64 `json:"lastSeenAgeSeconds,omitempty"`
	// Relists are the kubelet's relist durations since it started, and
	// Intervals the time between its relists' starts.
	Relists   Histogram `json:"relists"`
	Intervals Histogram `json:"intervals"`
	// RecentRelists and RecentIntervals are the same since this reader's
	// previous read, when there was one and the kubelet did not restart
	// in between: a daemon reading every few seconds sees the relists of
	// now, which the histograms since start blur.
	RecentRelists   *Histogram `json:"recentRelists,omitempty"`
	RecentIntervals *Histogram `json:"recentIntervals,omitempty"`
	// RecentSinceSeconds is how long before ReadAt the previous read
	// was.
	RecentSinceSeconds float64 `json:"recentSinceSeconds,omitempty"`
	// Evented: the kubelet runs EventedPLEG (its event stream connected
	// at least once), so its generic PLEG relists every 5 minutes and
	// its last-seen ages up to that on a healthy node.
	Evented bool `json:"evented,omitempty"`
}

// Period is how often the kubelet's generic PLEG relists.
func (r Reading) Period() time.Duration {
	if r.Evented {
		return EventedRelistPeriod
	}
	return RelistPeriod
}

// Threshold is the age of the kubelet's last-seen PLEG at which it
// reports PLEG not healthy.
func (r Reading) Threshold() time.Duration {
	if r.Evented {
		return EventedRelistThreshold
	}
	return RelistThreshold
}

// BehindAfter is the age of the kubelet's last-seen PLEG past which it
// is behind, well before its threshold: half of it, 90 s; with
// EventedPLEG, whose healthy last-seen is up to 5 minutes old, its period
// and half of what is left, 7.5 minutes.
func (r Reading) BehindAfter() time.Duration {
	if r.Evented {
		return EventedRelistPeriod + (EventedRelistThreshold-EventedRelistPeriod)/2
	}
	return RelistThreshold / 2
}

// Histogram is a histogram's count with its quantiles estimated from the
// buckets, in seconds. A quantile past the highest finite bucket (10 s
// for the kubelet's) is that bucket's bound, and Beyond tells it.
type Histogram struct {
	Count      uint64  `json:"count"`
	P50Seconds float64 `json:"p50Seconds"`
	P99Seconds float64 `json:"p99Seconds"`
	// Beyond tells the p99 is past the highest finite bucket: at least
	// P99Seconds.
	Beyond bool `json:"beyond,omitempty"`
}

// Fetcher fetches the kubelet's metrics text: the kubelet's port or the
// API server's node proxy.
type Fetcher interface {
	// Fetch returns the text of the kubelet's /metrics.
	Fetch(ctx context.Context) ([]byte, error)
	// String says where it fetches from.
	String() string
}

// Options configure a Reader.
type Options struct {
	// Timeout bounds each read (DefaultTimeout).
	Timeout time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Reader reads the kubelet's PLEG through a Fetcher. It is safe for
// concurrent use; it keeps the previous read's histograms for the recent
// quantiles.
type Reader struct {
	fetch   Fetcher
	timeout time.Duration
	now     func() time.Time

	mu   sync.Mutex
	prev *snapshot
}

// snapshot is the histograms of one read, for the next one's recent
// quantiles.
type snapshot struct {
	at                time.Time
	relists, interval *dto.Histogram
}

// New returns a Reader over f.
func New(f Fetcher, o Options) *Reader {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reader{fetch: f, timeout: o.Timeout, now: o.Now}
}

var _ Source = (*Reader)(nil)

// Read implements Source.
func (r *Reader) Read(ctx context.Context) Reading {
	rd := Reading{Source: r.fetch.String(), ReadAt: r.now()}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	text, err := r.fetch.Fetch(ctx)
	rd.TookSeconds = r.now().Sub(rd.ReadAt).Seconds()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			err = fmt.Errorf("no answer within %v: %w", r.timeout, err)
		}
		rd.Error = err.Error()
		return rd
	}
	fams, err := Parse(text)
	if err != nil {
		rd.Error = err.Error()
		return rd
	}
	cur := rd.fill(fams)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.prev; p != nil && cur.relists != nil && p.relists != nil {
		rel, okR := since(cur.relists, p.relists)
		iv, okI := since(cur.interval, p.interval)
		if okR && okI {
			rd.RecentRelists, rd.RecentIntervals = &rel, &iv
			rd.RecentSinceSeconds = rd.ReadAt.Sub(p.at).Seconds()
		}
	}
	if cur.relists != nil {
		cur.at = rd.ReadAt
		r.prev = cur
	}
	return rd
}

// fill sets the reading's figures from the metric families, and returns
// the histograms read.
func (rd *Reading) fill(fams map[string]*dto.MetricFamily) *snapshot {
	var missing []string
	cur := &snapshot{}
	if f, ok := fams[LastSeenMetric]; ok {
		if v, ok := gaugeValue(f); ok && v > 0 && !math.IsInf(v, 0) && v < 1<<40 {
			sec, frac := math.Modf(v)
			rd.LastSeen = time.Unix(int64(sec), int64(frac*1e9))
			rd.LastSeenAgeSeconds = math.Max(0, rd.ReadAt.Sub(rd.LastSeen).Seconds())
		}
	} else {
		missing = append(missing, LastSeenMetric)
	}
	if h := histogram(fams[RelistDurationMetric]); h != nil {
		cur.relists, rd.Relists = h, summarize(h)
	} else {
		missing = append(missing, RelistDurationMetric)
	}
	if h := histogram(fams[RelistIntervalMetric]); h != nil {
		cur.interval, rd.Intervals = h, summarize(h)
	}
	for _, name := range []string{EventedMetric, EventedMetric + "_total"} {
		if v, ok := counterValue(fams[name]); ok && v > 0 {
			rd.Evented = true
		}
	}
	if len(missing) > 0 {
		rd.Error = "the kubelet's metrics have no " + strings.Join(missing, " nor ") +
			": not a kubelet's /metrics, or a kubelet without a PLEG"
	}
	return cur
}

// Parse reads the families this package needs out of a metrics text,
// leaving the rest of the kubelet's metrics (thousands of series) unparsed:
// a line this package does not read cannot fail the parse.
func Parse(text []byte) (map[string]*dto.MetricFamily, error) {
	var keep bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if wanted(line) {
			keep.Write(line)
			keep.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the kubelet's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(&keep)
	if err != nil {
		return nil, fmt.Errorf("parsing the kubelet's metrics: %w", err)
	}
	return fams, nil
}

// wanted tells a line of the exposition format that belongs to one of the
// three families: its sample, or its HELP or TYPE comment.
func wanted(line []byte) bool {
	s := string(line)
	if rest, ok := strings.CutPrefix(s, "# "); ok {
		f := strings.Fields(rest)
		if len(f) < 2 || (f[0] != "HELP" && f[0] != "TYPE") {
			return false
		}
		s = f[1]
	}
	for _, name := range []string{LastSeenMetric, RelistDurationMetric, RelistIntervalMetric, EventedMetric} {
		if rest, ok := strings.CutPrefix(s, name); ok {
			if name == EventedMetric {
				// Newer exposition names a counter with _total.
				rest = strings.TrimPrefix(rest, "_total")
			}
			switch {
			case rest == "", rest[0] == ' ', rest[0] == '{', rest[0] == '\t':
				return true
			case strings.HasPrefix(rest, "_bucket"), strings.HasPrefix(rest, "_sum"), strings.HasPrefix(rest, "_count"):
				return name != LastSeenMetric
			}
		}
	}
	return false
}

func gaugeValue(f *dto.MetricFamily) (float64, bool) {
	for _, m := range f.GetMetric() {
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// counterValue is the sum of a counter family's series.
func counterValue(f *dto.MetricFamily) (float64, bool) {
	var sum float64
	found := false
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			sum, found = sum+m.GetCounter().GetValue(), true
		case m.GetUntyped() != nil:
			sum, found = sum+m.GetUntyped().GetValue(), true
		}
	}
	return sum, found
}

func histogram(f *dto.MetricFamily) *dto.Histogram {
	for _, m := range f.GetMetric() {
		if h := m.GetHistogram(); h != nil {
			return h
		}
	}
	return nil
}

// summarize estimates a histogram's quantiles.
func summarize(h *dto.Histogram) Histogram {
	out := Histogram{Count: h.GetSampleCount()}
	if out.Count == 0 {
		return out
	}
	out.P50Seconds = finite(metrics.HistogramQuantile(h, 0.5))
	out.P99Seconds = finite(metrics.HistogramQuantile(h, 0.99))
	// Past the highest finite bucket the estimate stops at its bound.
	var top float64
	var below uint64
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			top, below = b.GetUpperBound(), b.GetCumulativeCount()
		}
	}
	out.Beyond = float64(below) < 0.99*float64(out.Count) && out.P99Seconds >= top
	return out
}

// since is the histogram of what was observed between prev and cur;
// false when cur is not later than prev (the kubelet restarted, or the
// buckets changed).
func since(cur, prev *dto.Histogram) (Histogram, bool) {
	if cur == nil || prev == nil || cur.GetSampleCount() < prev.GetSampleCount() ||
		len(cur.GetBucket()) != len(prev.GetBucket()) {
		return Histogram{}, false
	}
	d := &dto.Histogram{}
	n := cur.GetSampleCount() - prev.GetSampleCount()
	d.SampleCount = &n
	for i, b := range cur.GetBucket() {
		pb := prev.GetBucket()[i]
		if b.GetUpperBound() != pb.GetUpperBound() || b.GetCumulativeCount() < pb.GetCumulativeCount() {
			return Histogram{}, false
		}
		c, ub := b.GetCumulativeCount()-pb.GetCumulativeCount(), b.GetUpperBound()
		d.Bucket = append(d.Bucket, &dto.Bucket{CumulativeCount: &c, UpperBound: &ub})
	}
	return summarize(d), true
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}

// httpFetcher fetches a URL with a client that carries the credentials.
type httpFetcher struct {
	client *http.Client
	url    string
	where  string
}

func (f *httpFetcher) String() string { return f.where }

// Fetch implements Fetcher.
func (f *httpFetcher) Fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, statusError(resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("the answer is larger than %d MiB: not a kubelet's metrics", MaxBytes>>20)
	}
	return b, nil
}

// statusError says what an HTTP status means for a reader of the
// kubelet's metrics.
func statusError(code int, msg string) error {
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	switch code {
	case http.StatusUnauthorized:
		return fmt.Errorf("401 Unauthorized: the kubelet (or API server) did not accept the credential: %s", msg)
	case http.StatusForbidden:
		return fmt.Errorf("403 Forbidden: the credential may not get nodes/metrics (nodes/proxy through the API server): %s",
			msg)
	}
	return fmt.Errorf("HTTP %d: %s", code, msg)
}
