// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/internal/format"
)

// The charts are inline SVG drawn here, so that the page needs nothing
// but itself. Every text from the runtime goes through template's
// escaping.

const (
	chartWidth = 960
	labelWidth = 230
	plotRight  = 40
	rowHeight  = 30
	axisHeight = 34
)

// logAxis maps durations onto x with a logarithmic scale.
type logAxis struct {
	lo, hi     float64 // log10 of seconds
	left, span float64
}

func newLogAxis(minD, maxD time.Duration) logAxis {
	lo := math.Floor(math.Log10(max(minD.Seconds(), 1e-6)))
	hi := math.Ceil(math.Log10(max(maxD.Seconds(), 1e-5)))
	if hi <= lo {
		hi = lo + 1
	}
	return logAxis{lo: lo, hi: hi, left: labelWidth, span: chartWidth - labelWidth - plotRight}
}

func (a logAxis) x(d time.Duration) float64 {
	v := math.Log10(max(d.Seconds(), math.Pow(10, a.lo)))
	return a.left + (min(v, a.hi)-a.lo)/(a.hi-a.lo)*a.span
}

// ticks draws the decade grid and its labels below y.
func (a logAxis) ticks(b *strings.Builder, top, bottom float64) {
	for e := a.lo; e <= a.hi; e++ {
		d := time.Duration(math.Pow(10, e) * float64(time.Second))
		x := a.x(d)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, x, top, x, bottom)
		fmt.Fprintf(
			b,
			`<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`,
			x,
			bottom+16,
			format.Duration(d),
		)
	}
}

// marker draws a named vertical line, such as the relist period.
func (a logAxis) marker(b *strings.Builder, d time.Duration, name, class string, top, bottom float64) {
	x := a.x(d)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="marker %s"/>`, x, top-4, x, bottom, class)
	fmt.Fprintf(
		b,
		`<text x="%.1f" y="%.1f" class="marker-label %s-label" text-anchor="middle">%s</text>`,
		x,
		top-8,
		class,
		esc(name),
	)
}

func esc(s string) string { return template.HTMLEscapeString(s) }

func svg(height float64, title string, body string) template.HTML {
	// Built from escaped parts only.
	return template.HTML(
		fmt.Sprintf(`<svg viewBox="0 0 %d %.0f" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">%s</svg>`,
			chartWidth, height, esc(title), body),
	) // #nosec G203 -- every runtime string is escaped
}

// projectionChart draws the projected relists against the period, the
// alert and the threshold.
func projectionChart(p doctor.Projection) template.HTML {
	bars := []struct {
		label string
		d     time.Duration
		class string
	}{
		{"kubelet, nothing changed", format.Seconds(p.SteadySeconds), "kubelet"},
		{"kubelet, every pod changed", format.Seconds(p.KubeletWorstSeconds), "kubelet"},
		{"pleg, every pod changed", format.Seconds(p.PlegWorstSeconds), "pleg"},
	}
	threshold := format.Seconds(p.ThresholdSeconds)
	longest := threshold
	shortest := time.Duration(math.MaxInt64)
	for _, b := range bars {
		longest = max(longest, b.d)
		if b.d > 0 {
			shortest = min(shortest, b.d)
		}
	}
	axis := newLogAxis(min(shortest, 100*time.Microsecond), longest)
	top := 30.0
	bottom := top + float64(len(bars))*rowHeight
	var b strings.Builder
	axis.ticks(&b, top, bottom)
	for i, bar := range bars {
		y := top + float64(i)*rowHeight
		x := axis.x(bar.d)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="label">%s</text>`, labelWidth-10, y+19, esc(bar.label))
		fmt.Fprintf(
			&b,
			`<rect x="%d" y="%.1f" width="%.1f" height="18" class="bar %s"/>`,
			labelWidth,
			y+6,
			max(x-labelWidth, 1),
			bar.class,
		)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="value">%s</text>`, x+6, y+19, format.Duration(bar.d))
	}
	axis.marker(
		&b,
		format.Seconds(p.PeriodSeconds),
		"period "+format.Duration(format.Seconds(p.PeriodSeconds)),
		"period",
		top,
		bottom,
	)
	axis.marker(
		&b,
		format.Seconds(p.AlertSeconds),
		"alert "+format.Duration(format.Seconds(p.AlertSeconds)),
		"alert",
		top,
		bottom,
	)
	axis.marker(&b, threshold, "threshold "+format.Duration(threshold), "threshold", top, bottom)
	return svg(bottom+axisHeight, "Projected relist durations", b.String())
}

// latencyChart draws each operation's spread: min to max as a line, p50
// to p99 as a box, p50 as a tick.
func latencyChart(ops []doctor.Operation) template.HTML {
	if len(ops) == 0 {
		return ""
	}
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for _, o := range ops {
		lo, hi = min(lo, format.Seconds(o.MinSeconds)), max(hi, format.Seconds(o.MaxSeconds))
	}
	axis := newLogAxis(lo, hi)
	top := 10.0
	bottom := top + float64(len(ops))*rowHeight
	var b strings.Builder
	axis.ticks(&b, top, bottom)
	for i, o := range ops {
		y := top + float64(i)*rowHeight + rowHeight/2
		xMin, xMax := axis.x(format.Seconds(o.MinSeconds)), axis.x(format.Seconds(o.MaxSeconds))
		x50, x99 := axis.x(format.Seconds(o.P50Seconds)), axis.x(format.Seconds(o.P99Seconds))
		class := "op"
		if o.Timeouts > 0 || o.Errors > 0 {
			class = "op failing"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="label">%s</text>`, labelWidth-10, y+4, esc(o.Name))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="whisker"/>`, xMin, y, xMax, y)
		fmt.Fprintf(
			&b,
			`<rect x="%.1f" y="%.1f" width="%.1f" height="14" class="%s">`+
				`<title>%s: p50 %s, p90 %s, p99 %s, max %s over %d calls</title></rect>`,
			x50,
			y-7,
			max(x99-x50, 2),
			class,
			esc(o.Name),
			format.Duration(format.Seconds(o.P50Seconds)),
			format.Duration(format.Seconds(o.P90Seconds)),
			format.Duration(format.Seconds(o.P99Seconds)),
			format.Duration(format.Seconds(o.MaxSeconds)),
			o.Calls,
		)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="median"/>`, x50, y-9, x50, y+9)
	}
	return svg(bottom+axisHeight, "Latency per operation", b.String())
}

// podsChart draws the slowest pods' inspection times on a linear scale.
func podsChart(pods []doctor.PodTiming) template.HTML {
	if len(pods) == 0 {
		return ""
	}
	longest := format.Seconds(pods[0].Seconds)
	for _, p := range pods {
		longest = max(longest, format.Seconds(p.Seconds))
	}
	// Room on the right for the value and the slowest call.
	span := float64(chartWidth - labelWidth - 340)
	top := 4.0
	var b strings.Builder
	for i, p := range pods {
		y := top + float64(i)*rowHeight
		w := 1.0
		if longest > 0 {
			w = max(span*float64(format.Seconds(p.Seconds))/float64(longest), 1)
		}
		class := "bar pod"
		note := slowestCall(p)
		if p.Hung {
			class = "bar pod hung"
		}
		fmt.Fprintf(
			&b,
			`<text x="%d" y="%.1f" class="label">%s</text>`,
			labelWidth-10,
			y+19,
			esc(truncate(p.Pod.String(), 34)),
		)
		fmt.Fprintf(
			&b,
			`<rect x="%d" y="%.1f" width="%.1f" height="18" class="%s"><title>%s</title></rect>`,
			labelWidth,
			y+6,
			w,
			class,
			esc(p.Pod.String()+": "+note),
		)
		fmt.Fprintf(
			&b,
			`<text x="%.1f" y="%.1f" class="value">%s</text>`,
			float64(labelWidth)+w+6,
			y+19,
			esc(format.Duration(format.Seconds(p.Seconds))+" — "+note),
		)
	}
	return svg(top+float64(len(pods))*rowHeight+8, "Slowest pods", b.String())
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
