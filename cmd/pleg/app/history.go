// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/internal/termsafe"
)

// historyFlags are pleg history's flags and argument.
type historyFlags struct {
	server       serverFlags
	q            api.HistoryQuery
	types        []string
	since, until string
	output       string
}

func newHistoryCommand(g *global) *cobra.Command {
	var o historyFlags
	cmd := &cobra.Command{
		Use:   "history [NAMESPACE/NAME]",
		Short: "Print what happened to a pod, from a pleg daemon's journal",
		Long: `History asks a pleg daemon (GET /v1/history) what its journal holds of a pod,
named NAMESPACE/NAME (every pod of that name: a StatefulSet's pod recreated
is two) or by --uid, including pods since removed, and prints it oldest
first: a table (TIME TYPE POD CONTAINER EXIT REASON SEQ), or with -o json the
daemon's answer, whose events also carry container IDs, images, restart
attempts, finish times and the runtime's messages. Without a pod it prints
the node's history.

--since and --until take an RFC 3339 time or a duration before now (90m,
2h, 7d). The latest --limit events are printed; the daemon says on stderr
how many earlier ones were left out, and from when its journal reaches back
when it no longer holds older events (--event-retention, --event-buffer).`,
		Args: cobra.MaximumNArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			return o.complete(args, time.Now())
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.server.url == "" {
				o.server.url = "http://" + daemon.DefaultListen
			}
			c, err := o.server.client()
			if err != nil {
				return err
			}
			h, err := c.History(cmd.Context(), o.q)
			if err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
			return printHistory(g.stdout, g.stderr, h, o.q, o.output == "json", time.Local)
		},
	}
	o.register(cmd.Flags())
	return cmd
}

func (o *historyFlags) register(f *pflag.FlagSet) {
	o.server.register(f, "the pleg daemon to ask (default http://"+daemon.DefaultListen+", pleg run's --listen; "+
		"the chart's is unix:///run/pleg/pleg.sock on the node)")
	f.StringVar(&o.q.UID, "uid", "", "the pod's UID, instead of or beside NAMESPACE/NAME")
	f.StringVar(&o.q.Container, "container", "", "only events of this container: a name or an ID")
	f.StringArrayVar(&o.types, "type", nil, "only events of this type ("+strings.Join(api.EventTypes(), ", ")+
		"); repeatable, or a comma list")
	f.StringVar(&o.since, "since", "", "only events at or after this time: RFC 3339, or a duration before now "+
		"(2h, 7d)")
	f.StringVar(&o.until, "until", "", "only events before this time: RFC 3339, or a duration before now")
	f.IntVar(&o.q.Limit, "limit", api.DefaultHistoryLimit, fmt.Sprintf("print the latest this many events, at "+
		"most %d", api.MaxHistoryLimit))
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
}

// complete makes the query of the argument and flags, at now.
func (o *historyFlags) complete(args []string, now time.Time) error {
	var errs []error
	q := &o.q
	if len(args) == 1 {
		ns, name, ok := strings.Cut(args[0], "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("pod %q: want NAMESPACE/NAME, or --uid", args[0]))
		}
		q.Namespace, q.Name = ns, name
	}
	for _, t := range o.types {
		for _, t := range strings.Split(t, ",") {
			if t = strings.TrimSpace(t); t != "" {
				q.Types = append(q.Types, t)
			}
		}
	}
	for _, tf := range []struct {
		name, value string
		t           *time.Time
	}{{"since", o.since, &q.Since}, {"until", o.until, &q.Until}} {
		if tf.value == "" {
			continue
		}
		t, err := api.ParseTime(tf.value, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", tf.name, err))
		}
		*tf.t = t
	}
	if q.Limit < 1 || q.Limit > api.MaxHistoryLimit {
		errs = append(errs, fmt.Errorf("--limit %d: want 1 to %d", q.Limit, api.MaxHistoryLimit))
	}
	errs = append(errs, oneOf("output", o.output, "table", "json"))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return q.Validate()
}

// printHistory writes h as a table or as JSON to w, and to notes what a
// reader of the table must know besides: events left out, events no
// longer kept.
func printHistory(w, notes io.Writer, h api.History, q api.HistoryQuery, asJSON bool, loc *time.Location) error {
	if asJSON {
		data, err := json.MarshalIndent(h, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", termsafe.JSON(data))
		return err
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 8, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "TIME\tTYPE\tPOD\tCONTAINER\tEXIT\tREASON\tSEQ") // into a bytes.Buffer: cannot fail
	for _, ev := range h.Events {
		t := ev.Time.In(loc).Format(time.RFC3339)
		if ev.Type == api.TypeGap {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t-\t-\t\tlost events %d..%d, of any pod\t%d\n", t, ev.Type, ev.From, ev.To,
				ev.Seq)
			continue
		}
		container, exit := "-", ""
		switch {
		case ev.Sandbox:
			container = "(sandbox)"
		case ev.ContainerName != "":
			container = termsafe.String(ev.ContainerName)
		}
		if ev.ExitCode != nil {
			exit = fmt.Sprint(*ev.ExitCode)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%d\n", t, termsafe.String(ev.Type),
			termsafe.String(ev.PodNamespace), termsafe.String(ev.PodName), container, exit,
			termsafe.String(ev.Reason), ev.Seq)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		// tabwriter pads the cell before an empty last one.
		trimmed := strings.TrimRight(line, " \n") + strings.Repeat("\n", strings.Count(line, "\n"))
		if _, err := io.WriteString(w, trimmed); err != nil {
			return err
		}
	}
	return printHistoryNotes(notes, h, q, loc)
}

// printHistoryNotes tells what the table leaves out, and whether an empty
// or short history is all that happened.
func printHistoryNotes(w io.Writer, h api.History, q api.HistoryQuery, loc *time.Location) error {
	var lines []string
	if h.Omitted > 0 {
		lines = append(lines, fmt.Sprintf("%d earlier events left out: raise --limit or narrow --since", h.Omitted))
	}
	// What the journal no longer holds matters only if the query reaches
	// back before what it holds.
	reachesBack := q.Since.IsZero() || h.FirstTime == nil || q.Since.Before(*h.FirstTime)
	if h.Dropped && reachesBack {
		from := "holds no events"
		if h.FirstTime != nil {
			from = "reaches back to " + h.FirstTime.In(loc).Format(time.RFC3339)
		}
		lines = append(lines, fmt.Sprintf("the daemon's journal %s (seq %d); older events are no longer kept", from,
			h.FirstSeq))
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
