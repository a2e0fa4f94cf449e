// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/internal/termsafe"
)

// RecordingView is a flight recording with the findings drawn from it,
// as the renderers write it.
type RecordingView struct {
	Verdict   doctor.Verdict       `json:"verdict"`
	Findings  []doctor.Finding     `json:"findings"`
	Recording *flightrec.Recording `json:"recording"`
}

// NewRecordingView draws the findings of rec.
func NewRecordingView(rec *flightrec.Recording) *RecordingView {
	fs := doctor.RecordingFindings(rec)
	if fs == nil {
		fs = []doctor.Finding{}
	}
	v := &RecordingView{Findings: fs, Recording: rec, Verdict: doctor.Healthy}
	for _, f := range fs {
		switch f.Severity {
		case doctor.Critical:
			v.Verdict = doctor.Unhealthy
		case doctor.Warning:
			if v.Verdict == doctor.Healthy {
				v.Verdict = doctor.AtRisk
			}
		}
	}
	return v
}

// RecordingJSON writes the view as indented JSON, escaped for a terminal:
// the stacks, names and messages come from the runtime and the host.
func RecordingJSON(w io.Writer, v *RecordingView) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", termsafe.JSON(data))
	return err
}

// RecordingList writes a listing of recordings, the newest last.
func RecordingList(out io.Writer, entries []flightrec.Entry) error {
	w := &errWriter{w: out}
	if len(entries) == 0 {
		w.printf("no recordings\n")
		return w.err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tTRIGGER\tTIME\tSIZE") // tw keeps no error: Flush tells
	for _, e := range entries {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d KiB\n", termsafe.String(e.Name), termsafe.String(e.Trigger),
			e.Time.UTC().Format(time.RFC3339), (e.Bytes+1023)>>10)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return w.err
}

// RecordingText writes the view for a terminal: the verdict and findings,
// the timeline, the parts, then what each part found; the stacks are
// left to the JSON.
func RecordingText(out io.Writer, v *RecordingView) error {
	w := &errWriter{w: out}
	rec := v.Recording
	w.printf("Recording %s: %s\n", rec.Name, strings.ToUpper(string(v.Verdict)))
	w.printf("Trigger: %s: %s\n", rec.Trigger, rec.Reason)
	w.printf("Onset %s; taken in %s\n", rec.Onset.UTC().Format(time.RFC3339Nano),
		rec.Finished.Sub(rec.Started).Round(time.Millisecond).String())
	w.printf("\nFindings\n")
	if len(v.Findings) == 0 {
		w.printf("  none\n")
	}
	for _, f := range v.Findings {
		w.printf("  [%s] %s\n", f.Severity, f.Title)
		for _, e := range f.Evidence {
			w.printf("      %s\n", e)
		}
		w.printf("      → %s\n", f.Action)
	}
	w.printf("\nTimeline\n")
	for _, e := range rec.Timeline {
		w.printf("  %s  %+8.3fs  %-10s %s", e.At.UTC().Format("15:04:05.000"), e.At.Sub(rec.Onset).Seconds(), e.Kind, e.What)
		if e.Detail != "" {
			w.printf(": %s", e.Detail)
		}
		w.printf("\n")
	}
	w.printf("\nParts\n")
	for _, p := range rec.Parts {
		w.printf("  %-16s %8s  %s\n", p.Name, p.Finished.Sub(p.Started).Round(time.Millisecond).String(), partWord(p))
	}
	writeRecordingDetails(w, rec)
	return w.err
}

// writeRecordingDetails writes what each part found: pleg's view, the
// runtime, its processes, the host.
func writeRecordingDetails(w *errWriter, rec *flightrec.Recording) {
	if pv := rec.Pleg; pv != nil {
		w.printf("\npleg\n")
		for _, c := range pv.InFlight {
			w.printf("  in flight  %-20s %-16s %.3f s\n", c.Op, c.ID, c.Seconds)
		}
		if st := pv.Status; st != nil {
			health := "healthy"
			if !st.Healthy {
				health = "NOT healthy: " + st.HealthError
			}
			w.printf("  %s; mode %s, stream connected %t; events %d, the last %s\n", health, st.Mode, st.StreamConnected,
				pv.Stream.Events, timeOrNever(pv.Stream.LastEventAt))
		}
	}
	if rt := rec.Runtime; rt != nil {
		w.printf("\nRuntime %s %s at %s: pid %d, up %.0f s\n", rt.Name, rt.Version, rt.Endpoint, rt.Pid, rt.UptimeSeconds)
		if rt.Stacks != "" {
			w.printf("  goroutine stacks: %d bytes from %s (-o json shows them)\n", len(rt.Stacks), rt.StacksSource)
		}
	}
	writeNode(w, rec)
}

func partWord(p flightrec.Part) string {
	switch {
	case p.TimedOut:
		return "TIMED OUT, abandoned"
	case p.Skipped != "":
		return "skipped: " + p.Skipped
	case p.Error != "":
		return "error: " + p.Error
	case p.Truncated:
		return "ok, truncated at its cap"
	}
	return "ok"
}

func timeOrNever(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

//go:embed recording.html.tmpl
var recordingTemplate string

var recordingPage = template.Must(template.Must(template.New("recording").Funcs(template.FuncMap{
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"part":    partWord,
}).Funcs(nodeFuncs).Parse(recordingTemplate)).Parse(nodeTemplate))

// recordingHTMLView is what the recording page reads.
type recordingHTMLView struct {
	*RecordingView
	Timeline template.HTML
}

// RecordingHTML writes the view as one self-contained page, with the
// timeline drawn.
func RecordingHTML(w io.Writer, v *RecordingView) error {
	return recordingPage.Execute(w, recordingHTMLView{RecordingView: v, Timeline: timelineChart(v.Recording)})
}

// timelineChart draws the triggers as marks and each part as a bar, on
// one time axis from the onset to the end of the recording.
func timelineChart(rec *flightrec.Recording) template.HTML {
	start, end := rec.Onset, rec.Finished
	for _, e := range rec.Timeline {
		if e.At.Before(start) {
			start = e.At
		}
		if e.At.After(end) {
			end = e.At
		}
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	const left, width, row = 150.0, 560.0, 22.0
	x := func(t time.Time) float64 { return left + width*float64(t.Sub(start))/float64(span) }
	var b strings.Builder
	y := 10.0
	for _, e := range rec.Timeline {
		if e.Kind != "trigger" {
			continue
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="5" class="trigger"><title>%s</title></circle>`+
			`<text x="4" y="%.1f">trigger %s</text>`, x(e.At), y+6, esc(e.Detail), y+10, esc(e.What))
		y += row
	}
	for _, p := range rec.Parts {
		class := "ok"
		switch {
		case p.TimedOut:
			class = "timedout"
		case p.Skipped != "":
			class = "skipped"
		case p.Error != "":
			class = "error"
		}
		w := max(x(p.Finished)-x(p.Started), 1)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="14" class="%s"><title>%s: %s</title></rect>`+
			`<text x="4" y="%.1f">%s</text>`, x(p.Started), y, w, class, esc(p.Name), esc(partWord(p)), y+11, esc(p.Name))
		y += row
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text><text x="%.1f" y="%.1f" text-anchor="end">+%s</text>`,
		left, y+12, "onset", left+width, y+12, esc(span.Round(time.Millisecond).String()))
	return svg(y+20, "timeline of the incident", b.String())
}
