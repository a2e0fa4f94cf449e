// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// request is a kind of request, as apiserver_request_total labels it.
type request struct {
	verb, group, resource, subresource string
}

func (r request) String() string {
	res := r.resource
	if r.subresource != "" {
		res += "/" + r.subresource
	}
	if r.group != "" {
		res += "." + r.group
	}
	return r.verb + " " + res
}

// plegs tells the requests pleg makes: it reads its Node once (GET),
// patches its condition (PATCH nodes/status) and writes events.k8s.io
// events (POST, and PATCH for a series). The harness itself only lists
// and watches, creates Nodes and updates their status as a kubelet
// registers them: none of those is counted as pleg's.
func plegs(r request) bool {
	switch {
	case r.group == "" && r.resource == "nodes":
		return (r.verb == "GET" && r.subresource == "") || (r.verb == "PATCH" && r.subresource == "status")
	case r.group == "events.k8s.io" && r.resource == "events":
		return r.verb == "POST" || r.verb == "PATCH"
	}
	return false
}

// sample is the API server's request counters at one moment, and the
// CPU it had used (process_cpu_seconds_total).
type sample struct {
	// at is when the answer had come whole; sent, when it was asked
	// for. The counters count every request done before sent, and none
	// done after at: on a busy machine the two are seconds apart.
	at, sent time.Time
	counts   map[request]float64
	cpu      float64
}

// plegRequests is the number of pleg's requests counted so far.
func (s sample) plegRequests() float64 {
	var n float64
	for r, c := range s.counts {
		if plegs(r) {
			n += c
		}
	}
	return n
}

// sampler reads the API server's /metrics every period: the counters of
// apiserver_request_total by verb and resource.
type sampler struct {
	hc  *http.Client
	url string

	mu      sync.Mutex
	samples []sample
	err     error
}

func newSampler(hc *http.Client, url string) *sampler {
	return &sampler{hc: hc, url: url + "/metrics"}
}

// run samples until ctx ends. A failed read is kept and ends the
// sampling: the figures would have a hole.
func (s *sampler) run(ctx context.Context, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		smp, err := s.read(ctx)
		s.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				s.err = err
			}
			s.mu.Unlock()
			return
		}
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *sampler) read(ctx context.Context) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return sample{}, err
	}
	sent := time.Now()
	resp, err := s.hc.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("%s: %s", s.url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	// The counters are read when the answer has come whole: that is the
	// moment they describe, give or take the answer's own time.
	at := time.Now()
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", s.url, err)
	}
	smp := sample{at: at, sent: sent, counts: map[request]float64{}}
	if mf := families["apiserver_request_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			smp.counts[requestOf(m)] += m.GetCounter().GetValue()
		}
	}
	if mf := families["process_cpu_seconds_total"]; mf != nil && len(mf.GetMetric()) == 1 {
		smp.cpu = mf.GetMetric()[0].GetCounter().GetValue()
	}
	return smp, nil
}

func requestOf(m *dto.Metric) request {
	var r request
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "verb":
			r.verb = l.GetValue()
		case "group":
			r.group = l.GetValue()
		case "resource":
			r.resource = l.GetValue()
		case "subresource":
			r.subresource = l.GetValue()
		}
	}
	return r
}

// mark is the time of the latest sample, once one asked for after now
// and after after was taken, so that it counts every request done before
// it was called: a phase's edges are samples.
func (s *sampler) mark(ctx context.Context, after time.Time) (time.Time, error) {
	now := time.Now()
	if after.After(now) {
		now = after
	}
	for {
		s.mu.Lock()
		err := s.err
		var last sample
		if n := len(s.samples); n > 0 {
			last = s.samples[n-1]
		}
		s.mu.Unlock()
		switch {
		case err != nil:
			return time.Time{}, err
		case last.sent.After(now):
			return last.at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no sample of the API server's counters: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// between returns the samples from from to to, both included.
func (s *sampler) between(from, to time.Time) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sample
	for _, smp := range s.samples {
		if !smp.at.Before(from) && !smp.at.After(to) {
			out = append(out, smp)
		}
	}
	return out
}

// phase is what pleg's requests were over a stretch of time.
type phase struct {
	name     string
	length   time.Duration
	requests float64             // pleg's, over the phase
	byKind   map[request]float64 // pleg's, by kind
	// peak is the highest rate of pleg's requests over a second (between
	// a sample and the first a second or more after it), peakAt when it
	// was, and peakCount the requests counted then.
	peak      float64
	peakAt    time.Duration
	peakCount float64
	// excess lists the intervals whose requests passed the bound, and
	// closest is the largest share of it any interval used.
	excess  []string
	closest float64
}

// rate is the phase's mean rate of pleg's requests.
func (p phase) rate() float64 { return p.requests / p.length.Seconds() }

// analyze reads what pleg's requests were over samples, and checks every
// interval between two of them, consecutive or not, against the bound:
// at most allowed(d) requests in an interval of length d.
func analyze(name string, samples []sample, allowed func(time.Duration) float64) phase {
	p := phase{name: name, byKind: map[request]float64{}}
	if len(samples) < 2 {
		return p
	}
	first, last := samples[0], samples[len(samples)-1]
	p.length = last.at.Sub(first.at)
	for r, c := range last.counts {
		if plegs(r) {
			if d := c - first.counts[r]; d > 0 {
				p.byKind[r] = d
				p.requests += d
			}
		}
	}
	totals := make([]float64, len(samples))
	for i, smp := range samples {
		totals[i] = smp.plegRequests()
	}
	for i := range samples {
		j := i + 1
		for j < len(samples) && samples[j].at.Sub(samples[i].at) < time.Second {
			j++
		}
		if j == len(samples) {
			break
		}
		n := totals[j] - totals[i]
		if r := n / samples[j].at.Sub(samples[i].at).Seconds(); r > p.peak {
			p.peak, p.peakAt, p.peakCount = r, samples[i].at.Sub(first.at), n
		}
	}
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			d := samples[j].at.Sub(samples[i].at)
			n := totals[j] - totals[i]
			p.closest = max(p.closest, n/allowed(d))
			if n > allowed(d) {
				p.excess = append(p.excess, fmt.Sprintf("%v requests in the %v from %v, over %v allowed",
					n, d.Round(time.Millisecond), samples[i].at.Sub(first.at).Round(time.Millisecond), allowed(d)))
			}
		}
	}
	return p
}

// kinds lists the phase's requests by kind, the most frequent first.
func (p phase) kinds() string {
	keys := make([]request, 0, len(p.byKind))
	for r := range p.byKind {
		keys = append(keys, r)
	}
	slices.SortFunc(keys, func(a, b request) int {
		if c := cmp.Compare(p.byKind[b], p.byKind[a]); c != 0 {
			return c
		}
		return cmp.Compare(a.String(), b.String())
	})
	s := ""
	for i, r := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %v", r, math.Round(p.byKind[r]))
	}
	return s
}

// TestAnalyze checks the harness' own arithmetic on made-up samples: the
// phase's requests by kind (pleg's alone), its peak over a second, and
// every interval, consecutive or not, held to the bound.
func TestAnalyze(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	patch := request{verb: "PATCH", resource: "nodes", subresource: "status"}
	post := request{verb: "POST", group: "events.k8s.io", resource: "events"}
	list := request{verb: "LIST", resource: "nodes"}
	at := func(ms int, patches, posts, lists float64) sample {
		return sample{at: t0.Add(time.Duration(ms) * time.Millisecond),
			counts: map[request]float64{patch: patches, post: posts, list: lists}}
	}
	samples := []sample{
		at(0, 10, 5, 100),
		at(600, 12, 5, 200), // 2 in 0.6 s: no second yet
		at(1000, 13, 6, 300),
		at(2000, 13, 6, 400),
		at(3000, 19, 6, 500),
	}
	// At most 4 requests in any interval.
	p := analyze("test", samples, func(time.Duration) float64 { return 4 })
	if p.requests != 10 || p.byKind[patch] != 9 || p.byKind[post] != 1 || p.byKind[list] != 0 {
		t.Errorf("requests %v by kind %v, want 10: 9 patches, 1 post, and no list", p.requests, p.byKind)
	}
	if p.peak != 6 || p.peakAt != 2*time.Second {
		t.Errorf("peak %v/s at %v, want 6/s from 2 s", p.peak, p.peakAt)
	}
	want := []string{
		"10 requests in the 3s from 0s, over 4 allowed",
		"8 requests in the 2.4s from 600ms, over 4 allowed",
		"6 requests in the 2s from 1s, over 4 allowed",
		"6 requests in the 1s from 2s, over 4 allowed",
	}
	if !slices.Equal(p.excess, want) {
		t.Errorf("excess\n%s\nwant\n%s", strings.Join(p.excess, "\n"), strings.Join(want, "\n"))
	}
	if p.closest != 2.5 {
		t.Errorf("closest to the bound %v, want 2.5 (10 requests in 3 s, 4 allowed)", p.closest)
	}
}
