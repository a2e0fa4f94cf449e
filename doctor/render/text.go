// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/internal/format"
	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/internal/termsafe"
)

// JSON writes the report as indented JSON, escaping what a terminal would
// act on: pod names and error messages come from the runtime.
func JSON(w io.Writer, r *doctor.Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", termsafe.JSON(data))
	return err
}

// verdictLine is the verdict as the first line of a report says it.
func verdictLine(r *doctor.Report) string {
	counts := map[doctor.Severity]int{}
	for _, f := range r.Findings {
		counts[f.Severity]++
	}
	var parts []string
	for _, s := range []doctor.Severity{doctor.Critical, doctor.Warning, doctor.Info} {
		if n := counts[s]; n > 0 {
			word := string(s)
			if n > 1 && s != doctor.Info {
				word += "s"
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, word))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing found")
	}
	return fmt.Sprintf("%s (%s)", strings.ToUpper(string(r.Verdict)), strings.Join(parts, ", "))
}

// runtimeLine names the runtime.
func runtimeLine(r *doctor.Report) string {
	rt := r.Runtime
	if !rt.Reachable {
		return "not answering"
	}
	s := strings.TrimSpace(rt.Name + " " + rt.Version)
	if rt.APIVersion != "" {
		s += ", CRI " + rt.APIVersion
	}
	return s
}

// Text writes the report for a terminal: the verdict and findings first,
// the figures after.
func Text(out io.Writer, r *doctor.Report) error {
	w := &errWriter{w: out}
	w.printf("pleg doctor: %s\n", r.Endpoint)
	w.printf("Verdict: %s\n", verdictLine(r))
	writeFindings(w, r)
	writeRuntime(w, r)
	if r.Node != nil {
		w.printf("\nThe node below the CRI\n")
		writeNode(w, r.Node)
	}
	writeOperations(w, r)
	writeLists(w, r)
	if r.Runtime.Reachable {
		writeWorkload(w, r)
		writeInspection(w, r)
		writeProjection(w, r)
	}
	writeDaemon(w, r.Daemon)
	w.printf("\nDiagnosed in %s of a %s budget.\n", seconds(r.DurationSeconds), seconds(r.BudgetSeconds))
	return w.err
}

// seconds formats a duration given in seconds, as the report holds them.
func seconds(s float64) string { return format.Duration(format.Seconds(s)) }

func writeFindings(w *errWriter, r *doctor.Report) {
	if len(r.Findings) == 0 {
		return
	}
	w.printf("\nFindings\n")
	for i, f := range r.Findings {
		w.printf("%2d. [%s] %s\n", i+1, f.Severity, f.Title)
		for _, e := range f.Evidence {
			w.printf("      - %s\n", e)
		}
		w.printf("      action: %s\n", f.Action)
	}
}

func writeRuntime(w *errWriter, r *doctor.Report) {
	w.printf("\nRuntime\n")
	t := w.table()
	t.row("  runtime\t%s\n", runtimeLine(r))
	if r.Runtime.Error != "" {
		t.row("  error\t%s\n", r.Runtime.Error)
	}
	if len(r.Runtime.Conditions) > 0 {
		var conds []string
		for _, c := range r.Runtime.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%t", c.Type, c.Status))
		}
		t.row("  conditions\t%s\n", strings.Join(conds, " "))
	}
	if r.Runtime.Reachable {
		s := r.Support
		t.row("  streaming lists\t%s (sandboxes), %s (containers)\n",
			s.StreamPodSandboxes.Availability, s.StreamContainers.Availability)
		t.row("  event stream\t%s (%s)\n", s.ContainerEvents.Availability, s.ContainerEvents.Detail)
		t.row("  sandbox status\t%s (%s)\n", s.SandboxStatusContainers.Availability, s.SandboxStatusContainers.Detail)
		t.row("  pod removal events\t%s (%s)\n", s.PodRemovalEvents.Availability, s.PodRemovalEvents.Detail)
	}
	w.flush(t)
}

func writeOperations(w *errWriter, r *doctor.Report) {
	if len(r.Operations) == 0 {
		return
	}
	w.printf("\nOperations\n")
	t := w.table()
	t.row("  OPERATION\tCALLS\tP50\tP90\tP99\tMAX\tERRORS\tTIMEOUTS\n")
	for _, o := range r.Operations {
		t.row("  %s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", o.Name, o.Calls,
			seconds(o.P50Seconds), seconds(o.P90Seconds), seconds(o.P99Seconds), seconds(o.MaxSeconds),
			o.Errors, o.Timeouts)
	}
	w.flush(t)
}

func writeLists(w *errWriter, r *doctor.Report) {
	if len(r.Lists) == 0 {
		return
	}
	w.printf("\nLists, as the kubelet receives them\n")
	t := w.table()
	t.row("  LIST\tITEMS\tSIZE\tOF LIMIT\n")
	for _, l := range r.Lists {
		if l.Error != "" && l.Bytes == 0 {
			t.row("  %s\t-\t-\t%s\n", l.Operation, l.Error)
			continue
		}
		t.row("  %s\t%d\t%s\t%.1f%% of %s\n", l.Operation, l.Items, msgsize.Bytes(l.Bytes),
			100*float64(l.Bytes)/float64(l.LimitBytes), msgsize.Bytes(l.LimitBytes))
	}
	w.flush(t)
}

func writeWorkload(w *errWriter, r *doctor.Report) {
	wl := r.Workload
	w.printf("\nWorkload\n")
	t := w.table()
	t.row("  pods\t%d (sandboxes: %d ready, %d not ready)\n", wl.Pods, wl.SandboxesReady, wl.SandboxesNotReady)
	t.row("  containers\t%d running, %d exited, %d created, %d unknown\n",
		wl.ContainersRunning, wl.ContainersExited, wl.ContainersCreated, wl.ContainersUnknown)
	t.row("  beyond collection\t%d exited containers more than the kubelet's collector keeps\n", wl.BeyondCollection)
	if len(wl.MostExited) > 0 {
		var most []string
		for _, pc := range wl.MostExited {
			most = append(most, fmt.Sprintf("%s (%d)", pc.Pod, pc.Count))
		}
		t.row("  most exited\t%s\n", strings.Join(most, ", "))
	}
	w.flush(t)
}

func writeInspection(w *errWriter, r *doctor.Report) {
	in := r.Inspection
	w.printf("\nInspection: %d of %d pods, %d at a time, %s per call at most",
		in.Pods, r.Workload.Pods, in.Concurrency, seconds(in.CallTimeoutSeconds))
	if in.StoppedEarly != "" {
		w.printf("; stopped early: %s", in.StoppedEarly)
	}
	w.printf("\n")
	if in.SlowestOperation != "" {
		w.printf("  slowest operation: %s, p99 %s, %.0f%% of the inspection's time\n", in.SlowestOperation,
			seconds(operationP99(r, in.SlowestOperation)), 100*in.SlowestOperationShare)
	}
	if len(in.SlowestPods) > 0 {
		t := w.table()
		t.row("  SLOWEST PODS\tTIME\tCALLS\tSLOWEST CALL\n")
		for _, p := range in.SlowestPods {
			t.row("  %s\t%s\t%d\t%s\n", p.Pod, seconds(p.Seconds), p.Calls, slowestCall(p))
		}
		w.flush(t)
	}
	if len(in.SlowestContainers) > 0 {
		t := w.table()
		t.row("  SLOWEST CONTAINERS\tCONTAINER ID\tSTATUS TIME\n")
		for _, c := range in.SlowestContainers {
			took := seconds(c.Seconds)
			if c.Error != "" {
				took += " (" + c.Error + ")"
			}
			t.row("  %s %s\t%s\t%s\n", c.Pod, c.Name, format.ShortID(c.ID), took)
		}
		w.flush(t)
	}
}

func writeProjection(w *errWriter, r *doctor.Report) {
	p := r.Projection
	w.printf("\nRelist projection (period %s, threshold %s, alert at %s)\n",
		seconds(p.PeriodSeconds), seconds(p.ThresholdSeconds), seconds(p.AlertSeconds))
	t := w.table()
	t.row("  kubelet, nothing changed\t%s\n", seconds(p.SteadySeconds))
	t.row("  kubelet, every pod changed, one by one\t%s\n", seconds(p.KubeletWorstSeconds))
	t.row("  pleg, every pod changed, %d at a time\t%s\n", p.PlegConcurrency, seconds(p.PlegWorstSeconds))
	w.flush(t)
	if p.Extrapolated {
		w.printf("  (extrapolated from %d of %d pods)\n", r.Inspection.Pods, p.Pods)
	}
}

func writeDaemon(w *errWriter, d *doctor.Daemon) {
	if d == nil {
		return
	}
	w.printf("\npleg daemon at %s\n", d.URL)
	t := w.table()
	if d.Health != "" {
		t.row("  health\t%s\n", firstLine(d.Health))
	}
	if d.Error != "" {
		t.row("  error\t%s\n", d.Error)
	}
	if d.Relists > 0 {
		t.row("  mode\t%s\n", d.Mode)
		t.row("  relists\t%d, p50 %s, p99 %s; last good one %s ago\n", d.Relists,
			seconds(d.RelistP50Seconds), seconds(d.RelistP99Seconds), seconds(d.LastSeenSecondsAgo))
	}
	if d.RelistRunningSeconds > 0 {
		t.row("  running relist\t%s so far\n", seconds(d.RelistRunningSeconds))
	}
	w.flush(t)
}

func operationP99(r *doctor.Report, name string) float64 {
	for _, o := range r.Operations {
		if o.Name == name {
			return o.P99Seconds
		}
	}
	return 0
}

func slowestCall(p doctor.PodTiming) string {
	s := p.SlowestOperation
	if p.SlowestContainer != "" {
		s += " " + p.SlowestContainer
	}
	s += " " + format.Duration(format.Seconds(p.SlowestSeconds))
	if p.Hung {
		s += " (no answer)"
	} else if p.Error != "" {
		s += " (" + p.Error + ")"
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// errWriter keeps the first write error, so the report is written without
// checking each line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(e, format, safe(args)...) // e keeps the error
}

// safe escapes, in the arguments of a line of the report, what a terminal
// would act on rather than show: names, IDs and messages come from the
// runtime and the daemon, and any client of the runtime may choose them.
func safe(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case error:
			args[i] = termsafe.String(v.Error())
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				args[i] = termsafe.String(rv.String()) // string and its named kinds
			}
		}
	}
	return args
}

// table aligns rows in columns; what goes wrong writing them surfaces at
// flush.
type table struct{ tw *tabwriter.Writer }

func (e *errWriter) table() table { return table{tabwriter.NewWriter(e, 0, 4, 2, ' ', 0)} }

func (t table) row(format string, args ...any) {
	_, _ = fmt.Fprintf(t.tw, format, safe(args)...) // buffered until flush, which reports the error
}

func (e *errWriter) flush(t table) {
	if err := t.tw.Flush(); err != nil && e.err == nil {
		e.err = err
	}
}
