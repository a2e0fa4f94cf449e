// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// RuleFile is a Prometheus rule file, as much of it as tests read and
// rewrite.
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is a group of rules evaluated together.
type RuleGroup struct {
	Name     string     `json:"name"`
	Interval string     `json:"interval,omitempty"`
	Rules    []RuleSpec `json:"rules"`
}

// RuleSpec is one recording or alerting rule.
type RuleSpec struct {
	Record        string            `json:"record,omitempty"`
	Alert         string            `json:"alert,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// ParseRules parses a rule file strictly: a field Prometheus does not
// know is an error, as it is to Prometheus.
func ParseRules(data []byte) (RuleFile, error) {
	var f RuleFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return f, fmt.Errorf("promtest: rule file: %w", err)
	}
	return f, nil
}

// ShortenFor returns the rule file data with the for: of every alert that
// waits longer than d set to d, and nothing else changed: the rules as
// shipped, in a test that cannot wait the minutes an operator does.
func ShortenFor(data []byte, d time.Duration) ([]byte, error) {
	f, err := ParseRules(data)
	if err != nil {
		return nil, err
	}
	for gi := range f.Groups {
		for ri := range f.Groups[gi].Rules {
			r := &f.Groups[gi].Rules[ri]
			if r.Alert == "" || r.For == "" {
				continue
			}
			was, err := model.ParseDuration(r.For)
			if err != nil {
				return nil, fmt.Errorf("promtest: alert %s: for %q: %w", r.Alert, r.For, err)
			}
			if time.Duration(was) > d {
				r.For = model.Duration(d).String()
			}
		}
	}
	return yaml.Marshal(f)
}
