// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	_ "embed"
	"html/template"
	"io"
	"time"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/internal/format"
	"github.com/plegkit/pleg/internal/msgsize"
)

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.Must(template.New("report").Funcs(nodeFuncs).Funcs(template.FuncMap{
	"duration": func(s float64) string { return format.Duration(format.Seconds(s)) },
	"bytes":    msgsize.Bytes,
	"percent": func(part, whole int) float64 {
		if whole == 0 {
			return 0
		}
		return 100 * float64(part) / float64(whole)
	},
	"percentOf":   func(share float64) float64 { return 100 * share },
	"short":       format.ShortID,
	"slowestCall": slowestCall,
	"rfc3339":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"add":         func(a, b int) int { return a + b },
}).Parse(pageTemplate)).Parse(nodeTemplate))

// htmlView is what the page template reads: the report and its charts.
type htmlView struct {
	*doctor.Report
	VerdictLine     string
	RuntimeLine     string
	ProjectionChart template.HTML
	LatencyChart    template.HTML
	PodsChart       template.HTML
}

// HTML writes the report as one self-contained page: styles and charts
// inline, nothing fetched.
func HTML(w io.Writer, r *doctor.Report) error {
	v := htmlView{
		Report:       r,
		VerdictLine:  verdictLine(r),
		RuntimeLine:  runtimeLine(r),
		LatencyChart: latencyChart(r.Operations),
		PodsChart:    podsChart(r.Inspection.SlowestPods),
	}
	if r.Runtime.Reachable {
		v.ProjectionChart = projectionChart(r.Projection)
	}
	return page.Execute(w, v)
}
