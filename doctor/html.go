package doctor

import (
	_ "embed"
	"html/template"
	"io"
	"time"
)

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"duration": func(s float64) string { return formatDuration(dur(s)) },
	"bytes":    formatBytes,
	"percent": func(part, whole int) float64 {
		if whole == 0 {
			return 0
		}
		return 100 * float64(part) / float64(whole)
	},
	"percentOf":   func(share float64) float64 { return 100 * share },
	"short":       short,
	"slowestCall": slowestCall,
	"rfc3339":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"add":         func(a, b int) int { return a + b },
}).Parse(pageTemplate))

// htmlView is what the page template reads: the report and its charts.
type htmlView struct {
	*Report
	VerdictLine     string
	RuntimeLine     string
	ProjectionChart template.HTML
	LatencyChart    template.HTML
	PodsChart       template.HTML
}

// WriteHTML writes the report as one self-contained page: styles and
// charts inline, nothing fetched.
func (r *Report) WriteHTML(w io.Writer) error {
	v := htmlView{
		Report:       r,
		VerdictLine:  r.verdictLine(),
		RuntimeLine:  r.runtimeLine(),
		LatencyChart: latencyChart(r.Operations),
		PodsChart:    podsChart(r.Inspection.SlowestPods),
	}
	if r.Runtime.Reachable {
		v.ProjectionChart = projectionChart(r.Projection)
	}
	return page.Execute(w, v)
}
