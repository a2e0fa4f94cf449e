// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/plegkit/pleg/test/chart/dashboard"
)

// TestDashboard reads the dashboard back with the SDK as Grafana's model
// and checks that every panel queries pleg's series. (TestChartCopies
// checks deploy's and the chart's JSON against it.)
func TestDashboard(t *testing.T) {
	data, err := dashboard.JSON()
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins()
	var d sdk.Dashboard //nolint:staticcheck // the classic JSON the chart ships (see dashboard.New)
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("the dashboard does not read back as Grafana's model: %v", err)
	}
	if d.Uid == nil || *d.Uid != dashboard.UID {
		t.Errorf("uid %v, want %s", d.Uid, dashboard.UID)
	}
	panels := 0
	for _, p := range d.Panels {
		if p.Panel == nil {
			continue
		}
		panels++
		title := *p.Panel.Title
		if len(p.Panel.Targets) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for _, target := range p.Panel.Targets {
			raw, _ := json.Marshal(target)
			var q struct {
				Expr    string
				Instant bool
			}
			_ = json.Unmarshal(raw, &q)
			if !strings.Contains(q.Expr, `job="pleg"`) {
				t.Errorf("panel %q: query %q does not select job=\"pleg\"", title, q.Expr)
			}
			// topk in a range query picks its N at every step, and the
			// panel shows every series ever among them: the N must be
			// chosen once, over the range (@ end()), or the query be
			// instant.
			if strings.Contains(q.Expr, "topk(") && !q.Instant && !strings.Contains(q.Expr, "[$__range:] @ end()") {
				t.Errorf("panel %q: range query %q: topk is not bounded over the time range", title, q.Expr)
			}
		}
	}
	annotations := 0
	for _, a := range d.Annotations.List {
		if a.Expr == nil {
			continue // Grafana's built-in one
		}
		annotations++
		if !strings.Contains(*a.Expr, `job="pleg"`) {
			t.Errorf("annotation %q: query %q does not select job=\"pleg\"", a.Name, *a.Expr)
		}
	}
	if annotations < 2 {
		t.Errorf("%d annotations from pleg's series, want the condition's changes and pleg's restarts", annotations)
	}
	if d.Description == nil || !strings.Contains(*d.Description, "Grafana "+dashboard.MinGrafana) {
		t.Errorf("description %v: want the minimum Grafana version", d.Description)
	}
	t.Logf("%d panels, %d annotations", panels, annotations)
}
