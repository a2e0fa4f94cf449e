// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/internal/termsafe"
)

// eventPrinter prints events as a table, a line each as they come, or as
// the JSON lines of /v1/events.
type eventPrinter struct {
	w      io.Writer
	json   bool
	loc    *time.Location
	header bool
}

const eventRow = "%-12s  %-16s  %-40s  %s\n"

func (p *eventPrinter) print(ev api.Event) error {
	if p.json {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", termsafe.JSON(data))
		return err
	}
	if !p.header {
		p.header = true
		if _, err := fmt.Fprintf(p.w, eventRow, "TIME", "TYPE", "NAMESPACE/POD", "CONTAINER"); err != nil {
			return err
		}
	}
	t := ev.Time.In(p.loc).Format("15:04:05.000")
	if ev.Type == api.TypeGap {
		missed := fmt.Sprintf("missed events %d..%d: re-read the pods", ev.From, ev.To)
		if ev.To == 0 {
			// The daemon could not tell how many: it refused to resume.
			missed = fmt.Sprintf("missed events from %d on: re-read the pods", ev.From)
		}
		_, err := fmt.Fprintf(p.w, eventRow, t, ev.Type, "-", missed)
		return err
	}
	_, err := fmt.Fprintf(
		p.w,
		eventRow,
		t,
		termsafe.String(ev.Type),
		termsafe.String(ev.PodNamespace+"/"+ev.PodName),
		containerColumn(ev),
	)
	return err
}

func containerColumn(ev api.Event) string {
	switch {
	case ev.ContainerID == "":
		return "-"
	case ev.Sandbox:
		return "(sandbox) " + termsafe.String(shortID(ev.ContainerID, false))
	default:
		col := ev.ContainerName + " " + shortID(ev.ContainerID, false)
		if ev.ExitCode != nil {
			// Why it died, as /v1/pods says it; the image and attempt
			// are in -o json, too long for a line.
			col += fmt.Sprintf(" exit %d", *ev.ExitCode)
			if ev.Reason != "" {
				col += " (" + ev.Reason + ")"
			}
		}
		return termsafe.String(col)
	}
}

// shortID truncates an ID as crictl does, unless noTrunc.
func shortID(id string, noTrunc bool) string {
	if noTrunc || len(id) <= 13 {
		return id
	}
	return id[:13]
}

// printPods writes the pod list in format: table, json or yaml.
func printPods(w io.Writer, list api.PodList, format string, noTrunc bool, now time.Time) error {
	switch format {
	case "json":
		data, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", termsafe.JSON(data))
		return err
	case "yaml":
		// As yaml.Marshal does, through JSON; a YAML parser refuses the
		// characters JSON leaves raw, and YAML's encoder quotes and
		// escapes a string with a control character in it.
		data, err := json.Marshal(list)
		if err != nil {
			return err
		}
		data, err = yaml.JSONToYAML(termsafe.JSON(data))
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 8, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tID\tSTATE\tATTEMPT\tCREATED\tINFO") // into a bytes.Buffer: cannot fail
	for _, p := range list.Pods {
		id, state, attempt, created := "-", "-", "", "-"
		if len(p.Sandboxes) > 0 {
			sb := p.Sandboxes[0]
			id, state = shortID(sb.ID, noTrunc), titled(sb.State)
			attempt, created = fmt.Sprint(sb.Attempt), ago(sb.CreatedAt, now)
		}
		info := strings.Join(p.IPs, ", ")
		if p.Error != "" {
			info = "inspection failed: " + p.Error
		}
		_, _ = fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(p.Namespace), termsafe.String(p.Name),
			termsafe.String(id), termsafe.String(state), attempt, created, termsafe.String(info))
		for _, c := range p.Containers {
			info := ""
			if c.ExitCode != nil {
				info = fmt.Sprintf("exit %d", *c.ExitCode)
				if c.Reason != "" {
					info += " (" + c.Reason + ")"
				}
			}
			_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", termsafe.String(c.Name),
				termsafe.String(shortID(c.ID, noTrunc)), termsafe.String(titled(c.State)), c.RestartCount,
				ago(c.CreatedAt, now), termsafe.String(info))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// tabwriter pads the cell before an empty last one.
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if _, err := io.WriteString(
			w,
			strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n")),
		); err != nil {
			return err
		}
	}
	return nil
}

// titled spells a state as crictl does: Running, NotReady...
func titled(state string) string {
	switch state {
	case "notready":
		return "NotReady"
	case "":
		return "-"
	default:
		return strings.ToUpper(state[:1]) + state[1:]
	}
}

// ago tells how long before now t was, coarsely.
func ago(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	d := now.Sub(*t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	}
}
