// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// APIError is an error Prometheus' API answered: errorType "bad_data" for
// a query that does not parse, "execution" for one that fails.
type APIError struct {
	Type, Message string
}

func (e *APIError) Error() string { return "prometheus: " + e.Type + ": " + e.Message }

// get calls the API at path with query and decodes its data into out.
func (s *Server) get(ctx context.Context, path string, query url.Values, out any) error {
	u := s.url + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	var envelope struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("promtest: %s answered %s: %q", path, resp.Status, tail(string(body), 3))
	}
	if envelope.Status != "success" {
		return &APIError{Type: envelope.ErrorType, Message: envelope.Error}
	}
	return json.Unmarshal(envelope.Data, out)
}

// Query evaluates expr now and returns the vector it gives (a scalar is
// one sample without labels); a range vector is an error, as in a rule.
func (s *Server) Query(ctx context.Context, expr string) (model.Vector, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var v model.Vector
		return v, json.Unmarshal(data.Result, &v)
	case "scalar":
		var sc model.Scalar
		if err := json.Unmarshal(data.Result, &sc); err != nil {
			return nil, err
		}
		return model.Vector{{Metric: model.Metric{}, Value: sc.Value, Timestamp: sc.Timestamp}}, nil
	}
	return nil, fmt.Errorf("promtest: %s: a %s, not a vector", expr, data.ResultType)
}

// Alert is an alert Prometheus holds: pending (its expression holds, for
// less than its for:) or firing.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// Name is the alert's name.
func (a Alert) Name() string { return a.Labels[model.AlertNameLabel] }

func (a Alert) String() string {
	var labels []string
	for _, k := range sortedKeys(a.Labels) {
		if k != model.AlertNameLabel {
			labels = append(labels, k+"="+a.Labels[k])
		}
	}
	return fmt.Sprintf(
		"%s{%s} %s since %s",
		a.Name(),
		strings.Join(labels, ","),
		a.State,
		a.ActiveAt.Format(time.TimeOnly),
	)
}

// Alerts are the alerts pending or firing now.
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	err := s.get(ctx, "/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// Rule is a rule as Prometheus evaluates it.
type Rule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Type      string `json:"type"`   // alerting or recording
	Health    string `json:"health"` // ok, err or unknown (not evaluated yet)
	LastError string `json:"lastError"`
	State     string `json:"state"` // of an alerting rule: inactive, pending, firing
}

// Rules are the rules loaded, group after group.
func (s *Server) Rules(ctx context.Context) ([]Rule, error) {
	var data struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get(ctx, "/api/v1/rules", nil, &data); err != nil {
		return nil, err
	}
	var rules []Rule
	for _, g := range data.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules, nil
}

// Target is a scrape target and how its last scrape went.
type Target struct {
	Labels     map[string]string `json:"labels"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Health     string            `json:"health"` // up, down or unknown
	LastError  string            `json:"lastError"`
	LastScrape time.Time         `json:"lastScrape"`
}

// Targets are the active targets.
func (s *Server) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		Active []Target `json:"activeTargets"`
	}
	err := s.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data)
	return data.Active, err
}

// pollInterval is how often Wait asks again: Prometheus evaluates every
// second in tests, so a condition is seen within a second of holding.
const pollInterval = 250 * time.Millisecond

// Wait polls cond until it holds, fails, or ctx ends; the error then says
// what was awaited and cond's last error. A deadline on ctx is a bound on
// progress, never a speed claim.
func Wait(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("promtest: waiting for %s: %w (last error: %w)", what, context.Cause(ctx), last)
			}
			return fmt.Errorf("promtest: waiting for %s: %w", what, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

// AlertMatch selects alerts: by name (or any, if empty), state
// ("pending", "firing", or "" for either) and labels, each of which the
// alert must carry with that value.
type AlertMatch struct {
	Name, State string
	Labels      map[string]string
}

// AlertIs is the AlertMatch of name in state with labels.
func AlertIs(name, state string, labels map[string]string) AlertMatch {
	return AlertMatch{Name: name, State: state, Labels: labels}
}

// Matches reports whether a is selected by m.
func (m AlertMatch) Matches(a Alert) bool {
	if m.Name != "" && a.Name() != m.Name || m.State != "" && a.State != m.State {
		return false
	}
	for k, v := range m.Labels {
		if a.Labels[k] != v {
			return false
		}
	}
	return true
}

func (m AlertMatch) String() string {
	return fmt.Sprintf("%s %s %v", m.Name, m.State, m.Labels)
}

// WaitAlert waits until an alert matching m is pending or firing, as m
// says, and returns it.
func (s *Server) WaitAlert(ctx context.Context, m AlertMatch) (Alert, error) {
	var found Alert
	err := Wait(ctx, "alert "+m.String(), func(ctx context.Context) (bool, error) {
		alerts, err := s.Alerts(ctx)
		for _, a := range alerts {
			if m.Matches(a) {
				found = a
				return true, nil
			}
		}
		return false, err
	})
	return found, err
}

// WaitNoAlert waits until no alert matches m.
func (s *Server) WaitNoAlert(ctx context.Context, m AlertMatch) error {
	return Wait(ctx, "no alert "+m.String(), func(ctx context.Context) (bool, error) {
		alerts, err := s.Alerts(ctx)
		if err != nil {
			return false, err
		}
		for _, a := range alerts {
			if m.Matches(a) {
				return false, nil
			}
		}
		return true, nil
	})
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
