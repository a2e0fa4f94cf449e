// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
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
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
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
	for _, banned := range []string{"<script", "<img", "<link", "<iframe", "@import", "url(", "https://"} {
		if strings.Contains(html, banned) {
			t.Errorf("the page contains %q", banned)
		}
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
