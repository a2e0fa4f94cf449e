// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/internal/format"
)

// JSON writes the report as indented JSON.
func JSON(w io.Writer, r *doctor.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
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

	if len(r.Findings) > 0 {
		w.printf("\nFindings\n")
		for i, f := range r.Findings {
			w.printf("%2d. [%s] %s\n", i+1, f.Severity, f.Title)
			for _, e := range f.Evidence {
				w.printf("      - %s\n", e)
			}
			w.printf("      action: %s\n", f.Action)
		}
	}

	w.printf("\nRuntime\n")
	tw := w.table()
	fmt.Fprintf(tw, "  runtime\t%s\n", runtimeLine(r))
	if r.Runtime.Error != "" {
		fmt.Fprintf(tw, "  error\t%s\n", r.Runtime.Error)
	}
	if len(r.Runtime.Conditions) > 0 {
		var conds []string
		for _, c := range r.Runtime.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%t", c.Type, c.Status))
		}
		fmt.Fprintf(tw, "  conditions\t%s\n", strings.Join(conds, " "))
	}
	if r.Runtime.Reachable {
		s := r.Support
		fmt.Fprintf(tw, "  streaming lists\t%s (sandboxes), %s (containers)\n", s.StreamPodSandboxes.Availability, s.StreamContainers.Availability)
		fmt.Fprintf(tw, "  event stream\t%s (%s)\n", s.ContainerEvents.Availability, s.ContainerEvents.Detail)
		fmt.Fprintf(tw, "  sandbox status\t%s (%s)\n", s.SandboxStatusContainers.Availability, s.SandboxStatusContainers.Detail)
		fmt.Fprintf(tw, "  pod removal events\t%s (%s)\n", s.PodRemovalEvents.Availability, s.PodRemovalEvents.Detail)
	}
	w.flush(tw)

	if len(r.Operations) > 0 {
		w.printf("\nOperations\n")
		tw = w.table()
		fmt.Fprintf(tw, "  OPERATION\tCALLS\tP50\tP90\tP99\tMAX\tERRORS\tTIMEOUTS\n")
		for _, o := range r.Operations {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", o.Name, o.Calls,
				format.Duration(format.Seconds(o.P50Seconds)), format.Duration(format.Seconds(o.P90Seconds)), format.Duration(format.Seconds(o.P99Seconds)), format.Duration(format.Seconds(o.MaxSeconds)), o.Errors, o.Timeouts)
		}
		w.flush(tw)
	}

	if len(r.Lists) > 0 {
		w.printf("\nLists, as the kubelet receives them\n")
		tw = w.table()
		fmt.Fprintf(tw, "  LIST\tITEMS\tSIZE\tOF LIMIT\n")
		for _, l := range r.Lists {
			if l.Error != "" && l.Bytes == 0 {
				fmt.Fprintf(tw, "  %s\t-\t-\t%s\n", l.Operation, l.Error)
				continue
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%.1f%% of %s\n", l.Operation, l.Items, format.Bytes(l.Bytes), 100*float64(l.Bytes)/float64(l.LimitBytes), format.Bytes(l.LimitBytes))
		}
		w.flush(tw)
	}

	if r.Runtime.Reachable {
		wl := r.Workload
		w.printf("\nWorkload\n")
		tw = w.table()
		fmt.Fprintf(tw, "  pods\t%d (sandboxes: %d ready, %d not ready)\n", wl.Pods, wl.SandboxesReady, wl.SandboxesNotReady)
		fmt.Fprintf(tw, "  containers\t%d running, %d exited, %d created, %d unknown\n", wl.ContainersRunning, wl.ContainersExited, wl.ContainersCreated, wl.ContainersUnknown)
		fmt.Fprintf(tw, "  beyond collection\t%d exited containers more than the kubelet's collector keeps\n", wl.BeyondCollection)
		if len(wl.MostExited) > 0 {
			var most []string
			for _, pc := range wl.MostExited {
				most = append(most, fmt.Sprintf("%s (%d)", pc.Pod, pc.Count))
			}
			fmt.Fprintf(tw, "  most exited\t%s\n", strings.Join(most, ", "))
		}
		w.flush(tw)

		in := r.Inspection
		w.printf("\nInspection: %d of %d pods, %d at a time, %s per call at most", in.Pods, r.Workload.Pods, in.Concurrency, format.Duration(format.Seconds(in.CallTimeoutSeconds)))
		if in.StoppedEarly != "" {
			w.printf("; stopped early: %s", in.StoppedEarly)
		}
		w.printf("\n")
		if in.SlowestOperation != "" {
			w.printf("  slowest operation: %s, p99 %s, %.0f%% of the inspection's time\n", in.SlowestOperation,
				format.Duration(format.Seconds(operationP99(r, in.SlowestOperation))), 100*in.SlowestOperationShare)
		}
		if len(in.SlowestPods) > 0 {
			tw = w.table()
			fmt.Fprintf(tw, "  SLOWEST PODS\tTIME\tCALLS\tSLOWEST CALL\n")
			for _, p := range in.SlowestPods {
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", p.Pod, format.Duration(format.Seconds(p.Seconds)), p.Calls, slowestCall(p))
			}
			w.flush(tw)
		}
		if len(in.SlowestContainers) > 0 {
			tw = w.table()
			fmt.Fprintf(tw, "  SLOWEST CONTAINERS\tCONTAINER ID\tSTATUS TIME\n")
			for _, c := range in.SlowestContainers {
				t := format.Duration(format.Seconds(c.Seconds))
				if c.Error != "" {
					t += " (" + c.Error + ")"
				}
				fmt.Fprintf(tw, "  %s %s\t%s\t%s\n", c.Pod, c.Name, format.ShortID(c.ID), t)
			}
			w.flush(tw)
		}

		p := r.Projection
		w.printf("\nRelist projection (period %s, threshold %s, alert at %s)\n",
			format.Duration(format.Seconds(p.PeriodSeconds)), format.Duration(format.Seconds(p.ThresholdSeconds)), format.Duration(format.Seconds(p.AlertSeconds)))
		tw = w.table()
		fmt.Fprintf(tw, "  kubelet, nothing changed\t%s\n", format.Duration(format.Seconds(p.SteadySeconds)))
		fmt.Fprintf(tw, "  kubelet, every pod changed, one by one\t%s\n", format.Duration(format.Seconds(p.KubeletWorstSeconds)))
		fmt.Fprintf(tw, "  pleg, every pod changed, %d at a time\t%s\n", p.PlegConcurrency, format.Duration(format.Seconds(p.PlegWorstSeconds)))
		w.flush(tw)
		if p.Extrapolated {
			w.printf("  (extrapolated from %d of %d pods)\n", r.Inspection.Pods, p.Pods)
		}
	}

	if d := r.Daemon; d != nil {
		w.printf("\npleg daemon at %s\n", d.URL)
		tw = w.table()
		if d.Health != "" {
			fmt.Fprintf(tw, "  health\t%s\n", firstLine(d.Health))
		}
		if d.Error != "" {
			fmt.Fprintf(tw, "  error\t%s\n", d.Error)
		}
		if d.Relists > 0 {
			fmt.Fprintf(tw, "  mode\t%s\n", d.Mode)
			fmt.Fprintf(tw, "  relists\t%d, p50 %s, p99 %s; last good one %s ago\n", d.Relists,
				format.Duration(format.Seconds(d.RelistP50Seconds)), format.Duration(format.Seconds(d.RelistP99Seconds)), format.Duration(format.Seconds(d.LastSeenSecondsAgo)))
		}
		if d.RelistRunningSeconds > 0 {
			fmt.Fprintf(tw, "  running relist\t%s so far\n", format.Duration(format.Seconds(d.RelistRunningSeconds)))
		}
		w.flush(tw)
	}

	w.printf("\nDiagnosed in %s of a %s budget.\n", format.Duration(format.Seconds(r.DurationSeconds)), format.Duration(format.Seconds(r.BudgetSeconds)))
	return w.err
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

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

func (e *errWriter) table() *tabwriter.Writer { return tabwriter.NewWriter(e, 0, 4, 2, ' ', 0) }

func (e *errWriter) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); err != nil && e.err == nil {
		e.err = err
	}
}
