// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plegkit/pleg/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/pleg/app -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from its golden file (go test ./cmd/pleg/app -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time {
	t := t0.Add(d)
	return &t
}

func code(n int32) *int32 { return &n }

func attempt(n uint32) *uint32 { return &n }

func testEvents() []api.Event {
	return []api.Event{
		{Seq: 1001, Time: t0.Add(1234 * time.Millisecond), Type: "ContainerStarted", PodUID: "u1", PodName: "web-0", PodNamespace: "shop", ContainerID: "4f1c2b3a5d6e7f8091a2b3c4d5e6f708", ContainerName: "nginx"},
		{Seq: 1002, Time: t0.Add(2 * time.Second), Type: "ContainerStarted", PodUID: "u1", PodName: "web-0", PodNamespace: "shop", ContainerID: "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", Sandbox: true},
		{Seq: 1003, Time: t0.Add(3 * time.Second), Type: "ContainerDied", PodUID: "u2", PodName: "db-0", PodNamespace: "data", ContainerID: "c0ffee", ContainerName: "postgres",
			FinishedAt: at(2500 * time.Millisecond), Image: "postgres:17", Attempt: attempt(2), ExitCode: code(3), Reason: "Error", Message: "exit status 3"},
		{Seq: 1004, Time: t0.Add(3 * time.Second), Type: "ContainerDied", PodUID: "u1", PodName: "web-0", PodNamespace: "shop", ContainerID: "4f1c2b3a5d6e7f8091a2b3c4d5e6f708", ContainerName: "nginx",
			FinishedAt: at(2900 * time.Millisecond), Image: "nginx:1.27", Attempt: attempt(0), ExitCode: code(137), Reason: "OOMKilled"},
		{Seq: 1005, Time: t0.Add(3 * time.Second), Type: "ContainerDied", PodUID: "u1", PodName: "web-0", PodNamespace: "shop", ContainerID: "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", Sandbox: true},
		// Vanished without being seen exited: no exit.
		{Seq: 1006, Time: t0.Add(3 * time.Second), Type: "ContainerDied", PodUID: "u3", PodName: "job-x", PodNamespace: "data", ContainerID: "d00d", ContainerName: "job",
			Image: "job:1", Attempt: attempt(0)},
		{Seq: 1007, Time: t0.Add(4 * time.Second), Type: "PodSync", PodUID: "u2", PodName: "db-0", PodNamespace: "data"},
		{Seq: 1010, Time: t0.Add(5 * time.Second), Type: api.TypeGap, From: 1008, To: 1010},
		// The client's own, when the daemon refused to resume.
		{Time: t0.Add(6 * time.Second), Type: api.TypeGap, From: 1011},
	}
}

func TestWatchOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
	}{{"watch.table", false}, {"watch.json", true}} {
		var buf bytes.Buffer
		p := &eventPrinter{w: &buf, json: tc.json, loc: time.UTC}
		for _, ev := range testEvents() {
			if err := p.print(ev); err != nil {
				t.Fatal(err)
			}
		}
		golden(t, tc.name, buf.Bytes())
	}
}

func testPodList() api.PodList {
	g := t0
	return api.PodList{GlobalTimestamp: &g, Pods: []api.Pod{
		{UID: "u2", Name: "db-0", Namespace: "data", IPs: []string{}, Timestamp: t0.Add(-time.Second),
			Error: "status of container c-db: rpc error: code = DeadlineExceeded desc = context deadline exceeded", Sandboxes: []api.Sandbox{}, Containers: []api.Container{}},
		{UID: "u1", Name: "web-0", Namespace: "shop", IPs: []string{"10.244.0.7", "fd00::7"}, Timestamp: t0,
			Sandboxes: []api.Sandbox{{ID: "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", State: "ready", Attempt: 0, CreatedAt: at(-3 * time.Hour)}},
			Containers: []api.Container{
				{ID: "4f1c2b3a5d6e7f8091a2b3c4d5e6f708", Name: "nginx", State: "running", CreatedAt: at(-2 * time.Minute), StartedAt: at(-2*time.Minute + time.Second), RestartCount: 1, Image: "nginx:1.27"},
				{ID: "7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e", Name: "nginx", State: "exited", CreatedAt: at(-3 * time.Hour), StartedAt: at(-3*time.Hour + time.Second),
					FinishedAt: at(-2*time.Minute - time.Second), ExitCode: code(137), Reason: "OOMKilled", RestartCount: 0, Image: "nginx:1.27"},
				{ID: "5555", Name: "sidecar", State: "created", CreatedAt: at(-5 * time.Second), RestartCount: 0, Image: "envoy:1.32"},
			}},
	}}
}

func TestPodsOutput(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		noTrunc      bool
	}{
		{"pods.table", "table", false},
		{"pods.notrunc.table", "table", true},
		{"pods.json", "json", false},
		{"pods.yaml", "yaml", false},
	} {
		var buf bytes.Buffer
		if err := printPods(&buf, testPodList(), tc.format, tc.noTrunc, t0); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name, buf.Bytes())
	}
}

func TestAgo(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "just now"}, {59 * time.Second, "59s ago"}, {90 * time.Second, "1m ago"}, {3 * time.Hour, "3h ago"}, {72 * time.Hour, "3d ago"}} {
		if got := ago(at(-tc.d), t0); got != tc.want {
			t.Errorf("ago(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if ago(nil, t0) != "-" {
		t.Error("ago(nil) should be -")
	}
}

// Issue 22 found that watch and pods printed what the runtime said raw: a
// container named with an escape sequence could clear the operator's
// screen, rewrite earlier lines or set the terminal's title. Every output
// escapes what a terminal would act on; JSON keeps its meaning.
func TestControlCharactersAreEscaped(t *testing.T) {
	const (
		clearScr = "\x1b[2J\x1b[H"     // clear the screen
		title    = "\x1b]0;pwned\a"    // set the window title
		csi      = "\u009b31m"         // C1 control sequence introducer
		override = "evil\u202etxt.exe" // right-to-left override
	)
	name := "web" + clearScr + title + csi
	ev := api.Event{Seq: 1, Time: t0, Type: "ContainerDied", PodUID: "u1", PodName: override, PodNamespace: "shop\tx",
		ContainerID: "c0ffee\x07", ContainerName: name, ExitCode: code(1), Reason: "Error" + clearScr, Message: title,
		Image: "img" + csi}
	list := api.PodList{Pods: []api.Pod{{UID: "u1", Name: override, Namespace: "shop", Error: "bad\x1b[1A\r\x00\xff",
		Sandboxes:  []api.Sandbox{{ID: "sb\x1b", State: "ready"}},
		Containers: []api.Container{{ID: "c\x1b", Name: name, State: "exited", ExitCode: code(1), Reason: "Error" + clearScr}}}}}

	outputs := map[string]*bytes.Buffer{}
	for _, asJSON := range []bool{false, true} {
		var buf bytes.Buffer
		if err := (&eventPrinter{w: &buf, json: asJSON, loc: time.UTC}).print(ev); err != nil {
			t.Fatal(err)
		}
		outputs[fmt.Sprintf("watch json=%v", asJSON)] = &buf
	}
	for _, format := range []string{"table", "json", "yaml"} {
		var buf bytes.Buffer
		if err := printPods(&buf, list, format, true, t0); err != nil {
			t.Fatal(err)
		}
		outputs["pods "+format] = &buf
	}
	for what, buf := range outputs {
		out := buf.String()
		// YAML counts format characters as printable and writes them
		// raw; they reorder what a terminal shows but make it do nothing.
		formatOK := what == "pods yaml"
		if i := strings.IndexFunc(out, func(r rune) bool {
			return r != '\n' && (unicode.IsControl(r) || (!formatOK && unicode.Is(unicode.Cf, r)))
		}); i >= 0 || !utf8.ValidString(out) {
			t.Errorf("%s: a raw control character at byte %d, or bytes that are not UTF-8:\n%q", what, i, out)
		}
		if what == "watch json=true" || what == "pods json" {
			var v any
			if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
				t.Errorf("%s: not JSON any more: %v", what, err)
			}
		}
	}
	for what, want := range map[string]string{
		"watch json=false": `web\x1b[2J\x1b[H\x1b]0;pwned\a\u009b31m c0ffee\a exit 1 (Error\x1b[2J\x1b[H)`,
		"watch json=true":  `"podName":"evil\u202etxt.exe"`,
		"pods table":       `evil\u202etxt.exe`,
		"pods json":        `\u009b31m`,
		"pods yaml":        `name: "web\e[2J\e[H\e]0;pwned\a\x9B31m"`,
	} {
		if !strings.Contains(outputs[what].String(), want) {
			t.Errorf("%s: %q not in\n%s", what, want, outputs[what])
		}
	}
	var back api.PodList
	if err := json.Unmarshal(outputs["pods json"].Bytes(), &back); err != nil || back.Pods[0].Containers[0].Name != name {
		t.Errorf("pods json decodes to %q, %v; want the name as the runtime gave it", back.Pods[0].Containers[0].Name, err)
	}
}
