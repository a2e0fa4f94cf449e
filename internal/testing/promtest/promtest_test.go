// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestShortenFor(t *testing.T) {
	in := []byte(`groups:
  - name: g
    rules:
      - record: r:x
        expr: sum(x)
      - alert: Slow
        expr: x > 1
        for: 15m
        labels: {severity: warning}
      - alert: Quick
        expr: x > 2
        for: 2s
      - alert: Now
        expr: x > 3
`)
	out, err := ShortenFor(in, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseRules(out)
	if err != nil {
		t.Fatal(err)
	}
	rules := f.Groups[0].Rules
	if got := []string{rules[1].For, rules[2].For, rules[3].For}; strings.Join(got, ",") != "5s,2s," {
		t.Errorf("for: %q, want 5s (shortened), 2s (already shorter), none", got)
	}
	if rules[0].Expr != "sum(x)" || rules[1].Labels["severity"] != "warning" || rules[1].Expr != "x > 1" {
		t.Errorf("something besides for: changed: %+v", rules)
	}
	if _, err := ShortenFor([]byte("groups: [{name: g, rules: [{alert: A, expr: x, fro: 1m}]}]"), time.Second); err == nil {
		t.Error("a misspelt field passed")
	}
}

// TestServer starts a real Prometheus that scrapes itself and evaluates
// a rule, and asks it what the harness's users ask.
func TestServer(t *testing.T) {
	bin := Require(t)
	rules := []byte(`groups:
  - name: test
    rules:
      - alert: Scraped
        expr: up{job="self"} == 1
        for: 1s
        labels: {severity: info}
        annotations: {summary: 'scraped {{ $labels.instance }}'}
`)
	// A server's own address is known once it runs: start one, then one
	// that scrapes the first.
	first := StartT(t, bin, Config{})
	s := StartT(t, bin, Config{
		ScrapeConfigs: []ScrapeConfig{{JobName: "self", StaticConfigs: []StaticConfig{{
			Targets: []string{strings.TrimPrefix(first.URL(), "http://")},
			Labels:  map[string]string{"__meta_node": "node-1"},
		}},
			RelabelConfigs: []RelabelConfig{{SourceLabels: []string{"__meta_node"}, TargetLabel: "instance"}},
		}},
		RuleFiles: map[string][]byte{"test.yaml": rules},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	a, err := s.WaitAlert(ctx, AlertIs("Scraped", "firing", map[string]string{"instance": "node-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if a.Annotations["summary"] != "scraped node-1" || a.Labels["severity"] != "info" {
		t.Errorf("alert %s: labels %v, annotations %v", a, a.Labels, a.Annotations)
	}
	v, err := s.Query(ctx, `count(up{job="self"}) + 1`)
	if err != nil || len(v) != 1 || v[0].Value != 2 {
		t.Errorf("query: %v, %v; want 2", v, err)
	}
	var apiErr *APIError
	if _, err := s.Query(ctx, `sum(`); !errors.As(err, &apiErr) || apiErr.Type != "bad_data" {
		t.Errorf("a query that does not parse: %v, want a bad_data APIError", err)
	}
	targets, err := s.Targets(ctx)
	if err != nil || len(targets) != 1 || targets[0].Health != "up" || targets[0].Labels["instance"] != "node-1" {
		t.Errorf("targets %+v, %v", targets, err)
	}
	r, err := s.Rules(ctx)
	if err != nil || len(r) != 1 || r[0].Health != "ok" || r[0].State != "firing" {
		t.Errorf("rules %+v, %v", r, err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if err := s.WaitNoAlert(short, AlertMatch{}); err == nil || !strings.Contains(err.Error(), "no alert") {
		t.Errorf("waiting for no alert while one fires: %v", err)
	}
}
