// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/kubeletpleg"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// steppingClock advances a millisecond each time it is read, so that every
// call a serial diagnosis times takes exactly one: the report of a seeded
// simulator is then the same on every run and every machine.
type steppingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *steppingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// goldenReport diagnoses a seeded simulator with a hung pod, exited
// containers and no event stream.
func goldenReport(t *testing.T) *doctor.Report {
	t.Helper()
	s := simtest.Start(t, sim.Options{Pods: 4, Containers: 2, Exited: 3, Seed: 42})
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := rt.Client()
	sandboxes, err := client.ListPodSandbox(t.Context(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFaults(sim.Faults{HangPod: sandboxes.GetItems()[1].GetMetadata().GetUid(), EventsUnimplemented: true}); err != nil {
		t.Fatal(err)
	}
	r, err := doctor.Diagnose(t.Context(), client, doctor.Options{
		Endpoint: "unix:///run/pleg-sim.sock",
		Budget:   4 * time.Second,
		Clock:    &steppingClock{now: time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)},
		Node:     fixedNode{goldenNode(sandboxes.GetItems()[1].GetId())},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fixedNode is a node's view that does not change: the golden report's.
type fixedNode struct{ rec *flightrec.Recording }

func (n fixedNode) Snapshot(context.Context) *flightrec.Recording { return n.rec }

// goldenNode is the view of a node whose shim of the hung pod's sandbox
// is stopped, with a runc waiting on it and the kubelet's PLEG behind.
func goldenNode(sandbox string) *flightrec.Recording {
	t0 := time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)
	return &flightrec.Recording{Version: flightrec.FormatVersion, Name: "live", Trigger: flightrec.TriggerLive,
		Onset: t0, Started: t0, Finished: t0.Add(1100 * time.Millisecond),
		Runtime: &flightrec.RuntimeState{Endpoint: "unix:///run/pleg-sim.sock", Pid: 100},
		Processes: &flightrec.Processes{FoundBy: "socket", HostView: true, WindowSeconds: 1, List: []flightrec.Process{
			{Pid: 100, PPid: 1, Role: "runtime", Comm: "containerd", State: "S", WChan: "futex_wait_queue",
				CPUSeconds: 120, RSSBytes: 90 << 20, AgeSeconds: 86400,
				Sched: &flightrec.Sched{WindowSeconds: 1, RanSeconds: 0.004, WaitedSeconds: 0.001, Threads: 40},
				Cgroup: &flightrec.Cgroup{CPUPath: "/system.slice/containerd.service", PidsPath: "/system.slice/containerd.service",
					PidsCurrent: 130}},
			{Pid: 150, PPid: 1, Role: "kubelet", Comm: "kubelet", State: "S", WChan: "futex_wait_queue", CPUSeconds: 300,
				RSSBytes: 120 << 20, AgeSeconds: 86000,
				Sched: &flightrec.Sched{WindowSeconds: 1, RanSeconds: 0.02, WaitedSeconds: 0.002, Threads: 50}},
			{Pid: 200, PPid: 1, Role: "shim", Comm: "containerd-shim", State: "T", Held: true, WChan: "do_signal_stop",
				CPUSeconds: 0.5, RSSBytes: 12 << 20, AgeSeconds: 3600, ID: sandbox, Children: 2},
			{Pid: 201, PPid: 200, Role: "child", Comm: "pause", State: "S", WChan: "sys_pause", AgeSeconds: 3600},
			{Pid: 202, PPid: 200, Role: "oci", Comm: "runc", Args0: "runc", Subcommand: "kill", ID: sandbox, State: "S",
				WChan: "futex_wait_queue", AgeSeconds: 45},
		}},
		Host: &flightrec.Host{Pressure: map[string]flightrec.Pressure{"cpu": {SomeAvg10: 4}, "memory": {}, "io": {SomeAvg10: 1}},
			Load: [3]float64{1.5, 1.2, 1}, Memory: map[string]int64{"MemTotal": 8 << 30, "MemAvailable": 5 << 30},
			MountsChecked: 28, PIDs: &flightrec.PIDs{Max: 32768, ThreadsMax: 192730, InUse: 812,
				Cgroups: []flightrec.PidsCgroup{{Of: "kubepods", Path: "/pids/kubepods", Current: 60}}}, OOMKills: 2},
		Kubelet: &kubeletpleg.Reading{Source: "https://127.0.0.1:10250/metrics", ReadAt: t0, TookSeconds: 0.02,
			LastSeen: t0.Add(-95 * time.Second), LastSeenAgeSeconds: 95,
			Relists:   kubeletpleg.Histogram{Count: 86000, P50Seconds: 0.003, P99Seconds: 0.02},
			Intervals: kubeletpleg.Histogram{Count: 86000, P50Seconds: 1.0, P99Seconds: 1.1}},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./doctor/render -run %s -update to accept):\n%s", name, t.Name(), got)
	}
}

func TestGoldenReports(t *testing.T) {
	r := goldenReport(t)
	var text, js bytes.Buffer
	if err := Text(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", text.Bytes())
	golden(t, "report.json", js.Bytes())
}

// The page stands alone: no script, nothing fetched, and what the runtime
// says is escaped.
func TestHTMLIsSelfContained(t *testing.T) {
	r := goldenReport(t)
	// A hostile runtime names a pod with markup.
	r.Inspection.SlowestPods[0].Pod.Name = `<script>alert("pod")</script>`
	r.Findings[0].Title = `<img src=x onerror=alert(1)>`
	var page bytes.Buffer
	if err := HTML(&page, r); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, banned := range []string{"<script", "<img", "<link", "<iframe", "@import", "url("} {
		if strings.Contains(html, banned) {
			t.Errorf("the page contains %q", banned)
		}
	}
	// The only https:// is the kubelet's metrics' address, told as text
	// (the src and href check above keeps it from being fetched).
	if n, told := strings.Count(html, "https://"), strings.Count(html, "https://127.0.0.1:10250/metrics"); n != told {
		t.Errorf("the page names %d https:// URLs, %d of them the kubelet's address", n, told)
	}
	if attr := regexp.MustCompile(`<[^>]*\s(src|href)=`).FindString(html); attr != "" {
		t.Errorf("the page refers to something else: %s", attr)
	}
	for _, want := range []string{"<svg", "Relist projection", "Latency per operation", "Slowest pods", "UNHEALTHY", "&lt;script&gt;", "&lt;img src=x"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Only the SVG namespace may name a URL.
	if n := strings.Count(html, "http://"); n != strings.Count(html, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("the page names %d URLs beside the SVG namespace", n)
	}
}

// Pod names, IDs and messages come from the runtime, whose clients may
// name a pod anything: an escape sequence in one must not clear the
// operator's screen or retitle the terminal. Text shows it escaped, as Go
// quotes it; JSON keeps its meaning.
func TestWhatTheRuntimeSaysIsEscaped(t *testing.T) {
	r := goldenReport(t)
	const evil = "web\x1b[2J\x1b]0;pwned\a\u202etxt"
	r.Runtime.Error = "refused: " + evil
	if len(r.Findings) == 0 {
		t.Fatal("the golden report has no findings")
	}
	r.Findings[0].Evidence = append(r.Findings[0].Evidence, "pod "+evil+" hangs")
	var text, js bytes.Buffer
	if err := Text(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "json": js.String()} {
		if i := strings.IndexFunc(out, func(r rune) bool {
			return r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
		}); i >= 0 {
			t.Errorf("%s: a raw control or format character at byte %d:\n%s", name, i, out)
		}
	}
	if want := `pod web\x1b[2J\x1b]0;pwned\a\u202etxt hangs`; !strings.Contains(text.String(), want) {
		t.Errorf("text does not show %s:\n%s", want, text.String())
	}
	var back doctor.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Runtime.Error != r.Runtime.Error {
		t.Errorf("JSON does not keep the message: %q, %v", back.Runtime.Error, err)
	}
}
