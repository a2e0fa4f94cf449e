// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/journal/journaltest"
	"github.com/plegkit/pleg/podcache"
)

func testHistory() api.History {
	first := t0.Add(time.Second)
	return api.History{FirstSeq: 1001, FirstTime: &first, LastSeq: 1010, Dropped: true, Omitted: 3, Events: []api.Event{
		{Seq: 1001, Time: t0.Add(time.Second), Type: "ContainerStarted", PodUID: "u2", PodName: "db-0", PodNamespace: "data",
			ContainerID: "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", Sandbox: true},
		{Seq: 1002, Time: t0.Add(2 * time.Second), Type: "ContainerStarted", PodUID: "u2", PodName: "db-0", PodNamespace: "data",
			ContainerID: "c0ffee", ContainerName: "postgres", Image: "postgres:17", Attempt: attempt(0)},
		{Seq: 1005, Time: t0.Add(5 * time.Second), Type: api.TypeGap, From: 1003, To: 1005},
		{Seq: 1006, Time: t0.Add(5 * time.Second), Type: "ContainerDied", PodUID: "u2", PodName: "db-0", PodNamespace: "data",
			ContainerID: "c0ffee", ContainerName: "postgres", FinishedAt: at(4500 * time.Millisecond), Image: "postgres:17",
			Attempt: attempt(0), ExitCode: code(137), Reason: "OOMKilled"},
		{Seq: 1007, Time: t0.Add(6 * time.Second), Type: "ContainerRemoved", PodUID: "u2", PodName: "db-0", PodNamespace: "data",
			ContainerID: "c0ffee", ContainerName: "postgres"},
		{Seq: 1010, Time: t0.Add(26*time.Hour + 10*time.Second), Type: "PodSync", PodUID: "u2", PodName: "db-0", PodNamespace: "data"},
	}}
}

func TestHistoryOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
	}{{"history.table", false}, {"history.json", true}} {
		var out, notes bytes.Buffer
		if err := printHistory(&out, &notes, testHistory(), api.HistoryQuery{}, tc.json, time.UTC); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name, out.Bytes())
		if tc.json {
			var back api.History
			if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Events) != 6 {
				t.Errorf("-o json does not decode to the history: %v", err)
			}
		} else {
			golden(t, "history.notes", notes.Bytes())
		}
	}
}

// What the journal no longer holds is told only when the query reaches
// back before what it holds.
func TestHistoryNotes(t *testing.T) {
	h := testHistory()
	h.Omitted = 0
	for _, tc := range []struct {
		since time.Time
		h     func(*api.History)
		want  string
	}{
		{time.Time{}, func(*api.History) {}, "reaches back to 2026-11-21T10:00:01Z (seq 1001)"},
		{t0, func(*api.History) {}, "reaches back to"},
		{t0.Add(time.Hour), func(*api.History) {}, ""},
		{time.Time{}, func(h *api.History) { h.Dropped = false }, ""},
		{time.Time{}, func(h *api.History) { h.FirstTime, h.Events = nil, nil }, "holds no events (seq 1001)"},
	} {
		h := testHistory()
		h.Omitted = 0
		tc.h(&h)
		var out, notes bytes.Buffer
		if err := printHistory(&out, &notes, h, api.HistoryQuery{Since: tc.since}, false, time.UTC); err != nil {
			t.Fatal(err)
		}
		if got := notes.String(); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("since %v: notes %q, want %q", tc.since, got, tc.want)
		}
	}
}

func TestHistoryTableEscapes(t *testing.T) {
	ev := api.Event{Seq: 1, Time: t0, Type: "ContainerDied", PodName: "evil\u202etxt", PodNamespace: "shop\tx",
		ContainerName: "web\x1b[2J", ExitCode: code(1), Reason: "Error\x1b]0;pwned\a"}
	var out bytes.Buffer
	if err := printHistory(&out, &out, api.History{Events: []api.Event{ev}}, api.HistoryQuery{}, false, time.UTC); err != nil {
		t.Fatal(err)
	}
	if i := strings.IndexFunc(out.String(), func(r rune) bool {
		return r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
	}); i >= 0 {
		t.Errorf("a raw control character at byte %d:\n%q", i, out.String())
	}
	if want := `shop\tx/evil\u202etxt   web\x1b[2J   1      Error\x1b]0;pwned\a`; !strings.Contains(out.String(), want) {
		t.Errorf("%q not in\n%s", want, out.String())
	}
}

// pleg history asks the daemon and prints its answer, a removed pod's
// included.
func TestHistoryCommand(t *testing.T) {
	j := journaltest.Memory(100, 1)
	for i, ev := range []pleg.Event{
		{Type: pleg.ContainerStarted, PodUID: "u-old", PodName: "db-0", PodNamespace: "data", ContainerID: "c1", ContainerName: "postgres"},
		{Type: pleg.ContainerStarted, PodUID: "u-web", PodName: "web", PodNamespace: "shop", ContainerID: "c2", ContainerName: "nginx"},
		{Type: pleg.ContainerDied, PodUID: "u-old", PodName: "db-0", PodNamespace: "data", ContainerID: "c1", ContainerName: "postgres",
			ExitCode: code(3), Reason: "Error"},
		{Type: pleg.ContainerRemoved, PodUID: "u-old", PodName: "db-0", PodNamespace: "data", ContainerID: "c1", ContainerName: "postgres"},
	} {
		ev.Observed = t0.Add(time.Duration(i) * time.Second)
		journaltest.Append(j, ev)
	}
	srv := api.NewServer(api.Options{Cache: podcache.New(), Journal: j, Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()

	local := func(s int) string { return t0.Add(time.Duration(s) * time.Second).In(time.Local).Format(time.RFC3339) }
	out, _, err := run(t, "history", "data/db-0", "--server", ts.URL, "--type", "ContainerDied,ContainerRemoved")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 ||
		strings.Join(strings.Fields(lines[1]), " ") != local(2)+" ContainerDied data/db-0 postgres 3 Error 3" ||
		strings.Join(strings.Fields(lines[2]), " ") != local(3)+" ContainerRemoved data/db-0 postgres 4" {
		t.Errorf("pleg history data/db-0:\n%s", out)
	}
	out, _, err = run(t, "history", "--uid", "u-web", "--server", ts.URL, "-o", "json")
	var h api.History
	if err != nil || json.Unmarshal([]byte(out), &h) != nil || len(h.Events) != 1 || h.Events[0].Seq != 2 {
		t.Errorf("pleg history --uid u-web -o json: %v\n%s", err, out)
	}
	// The daemon's refusal is the command's error.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "limit 5000: want 1 to 1000"})
	}))
	defer refusing.Close()
	if _, _, err := run(t, "history", "--server", refusing.URL, "--limit", "5000"); err == nil ||
		!strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "limit 5000: want 1 to 1000") {
		t.Errorf("a daemon's refusal: %v", err)
	}
}

func TestHistoryFlagsAreRefusedBeforeAsking(t *testing.T) {
	nowhere := "--server=unix:///nonexistent/pleg.sock"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "db-0"}, `pod "db-0": want NAMESPACE/NAME, or --uid`},
		{[]string{"history", "data/db-0/x"}, "want NAMESPACE/NAME"},
		{[]string{"history", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"history", "--since", "yesterday"}, `--since: "yesterday" is neither an RFC 3339 time`},
		{[]string{"history", "--until", "-1h"}, "--until"},
		{[]string{"history", "--limit", "0"}, "--limit 0: want 1 to 10000"},
		{[]string{"history", "--type", "ContainerDied,Exploded"}, `unknown event type "Exploded"`},
		{[]string{"history", "-o", "yaml"}, `--output "yaml": want table, json`},
		{[]string{"history", "--since", "1h", "--until", "2h"}, "is not before until"},
	} {
		_, _, err := run(t, append(tc.args, nowhere)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
