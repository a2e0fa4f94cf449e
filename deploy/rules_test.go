// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/internal/testing/promtest"
)

// rulesDir holds the rule file (the chart's rules rendered with its
// defaults) and its unit tests: apart from the manifests, so that
// `kubectl apply -f deploy/` applies Kubernetes objects alone.
const rulesDir = "prometheus"

// TestRulesWithPromtool checks the rule file with promtool, built from
// Prometheus' module (internal/testing/promtest), and runs its unit tests,
// prometheus/prometheus-rules.test.yaml.
func TestRulesWithPromtool(t *testing.T) {
	bin := promtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := bin.RunPromtool(ctx, rulesDir, "check", "rules", "--lint=all", "--lint-fatal", "prometheus-rules.yaml"); err != nil {
		t.Error(err)
	} else {
		t.Log(out)
	}
	out, err := bin.RunPromtool(ctx, rulesDir, "test", "rules", "prometheus-rules.test.yaml")
	if err != nil {
		t.Error(err)
	}
	t.Log(out)
}

// ruleTests mirrors promtool's unit test file, the parts read here.
type ruleTests struct {
	Tests []struct {
		Name           string `json:"name"`
		AlertRuleTests []struct {
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
		PromQLExprTests []struct {
			Expr string `json:"expr"`
		} `json:"promql_expr_test"`
	} `json:"tests"`
}

// TestEveryRuleIsUnitTested checks that the unit tests cover every rule:
// each alert is seen both firing and not, each recording rule's series
// queried.
func TestEveryRuleIsUnitTested(t *testing.T) {
	rules, err := promtest.ParseRules(read(t, filepath.Join(rulesDir, "prometheus-rules.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	var tests ruleTests
	if err := yaml.Unmarshal(read(t, filepath.Join(rulesDir, "prometheus-rules.test.yaml")), &tests); err != nil {
		t.Fatal(err)
	}
	firing, quiet := map[string]int{}, map[string]int{}
	var queried []string
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname]++
			} else {
				quiet[a.Alertname]++
			}
		}
		for _, q := range tc.PromQLExprTests {
			queried = append(queried, q.Expr)
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert != "" && (firing[r.Alert] == 0 || quiet[r.Alert] == 0):
				t.Errorf("alert %s: %d unit tests see it firing and %d quiet; want both", r.Alert, firing[r.Alert], quiet[r.Alert])
			case r.Record != "" && !strings.Contains(strings.Join(queried, "\n"), r.Record):
				t.Errorf("recording rule %s: no unit test queries it", r.Record)
			}
		}
	}
}
