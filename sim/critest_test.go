// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// critestNodes is how many specs critest runs at once: ten of the specs
// a simulator cannot pass wait a minute for what never comes (a log line,
// an exit, an open port), so they wait side by side. The nodes are idle
// processes meanwhile.
const critestNodes = 12

// critestTimeout bounds the whole run: on 2 busy cores it takes about two
// minutes, most of it those waits.
const critestTimeout = 15 * time.Minute

// TestCritest runs cri-tools' CRI validation suite against the simulator
// and compares the specs that fail with testdata/critest-impossible.txt,
// the specs a simulator cannot pass: every other spec must pass, and a
// listed spec that passes must leave the list.
//
// It lives in package sim because it checks the simulator's CRI contract
// from outside, as its unit tests do from inside, on an in-process server
// that the race detector watches under critest's load; `pleg sim` serves
// the same server.
func TestCritest(t *testing.T) {
	if testing.Short() {
		t.Skip("critest takes minutes; run without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), critestTimeout+30*time.Minute)
	defer cancel()
	bins, err := runtimetest.Critest(ctx, t.Logf)
	if err != nil {
		if runtimetest.InCI() {
			t.Fatalf("critest %s is required under CI=true but could not be built: %v", runtimetest.CritestVersion, err)
		}
		t.Skipf("skipping, critest %s could not be built (set CI=true to make this a failure): %v",
			runtimetest.CritestVersion, err)
	}
	impossible, err := readImpossible(filepath.Join("testdata", "critest-impossible.txt"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := LoadRegistry(filepath.Join("testdata", "critest-registry.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := startSim(t, Options{
		Registry: reg,
		// critest's pull timeout spec gives a pull 1 ms: a pull takes
		// longer, as any pull over a network does.
		Latency: LatencyModel{"pull_image": {P50: 20 * time.Millisecond}},
	})

	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	runCtx, stop := context.WithTimeout(ctx, critestTimeout)
	defer stop()
	cmd := exec.CommandContext(runCtx, bins.Critest,
		"-runtime-endpoint", s.Endpoint(),
		"-image-endpoint", s.Endpoint(),
		"-parallel", strconv.Itoa(critestNodes),
		"-ginkgo.json-report", report,
		"-ginkgo.no-color",
	)
	cmd.Dir = dir
	// critest leaves its log directories and its node symlink in TMPDIR.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	// Before t.TempDir's removal, which a mount left behind would fail.
	t.Cleanup(func() {
		if err := runtimetest.UnmountBelow(tmp); err != nil {
			t.Error(err)
		}
	})
	cmd.Env = append(os.Environ(),
		"PATH="+bins.BinDir()+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TMPDIR="+tmp,
	)
	t0 := time.Now()
	out, runErr := cmd.CombinedOutput()
	elapsed := time.Since(t0).Round(time.Second)
	// critest exits non-zero when a spec fails, which some always do: the
	// report tells which.
	specs, err := readCritestReport(report)
	if err != nil || len(specs) == 0 {
		t.Fatalf("critest did not report (%v; exit: %v); its output ends:\n%s", err, runErr, tailLines(string(out), 40))
	}

	c := compareCritest(specs, impossible)
	for _, p := range c.problems {
		t.Error(p)
	}
	t.Logf("critest %s against the simulator in %v with %d nodes: %d specs passed, %d failed (%d of them listed as impossible), %d skipped",
		runtimetest.CritestVersion, elapsed, critestNodes, c.passed, c.failed, c.listedFailed, c.skipped)
	if t.Failed() {
		t.Logf("critest output ends:\n%s", tailLines(string(out), 30))
	}
}

// critestOutcome is a critest run measured against the list of specs a
// simulator cannot pass.
type critestOutcome struct {
	passed, failed, listedFailed, skipped int
	// problems says what fails the test: an unlisted spec that failed,
	// a listed one that passed, was skipped or is gone.
	problems []string
}

// compareCritest compares the specs of a run with the impossible list.
func compareCritest(specs []critestSpec, impossible map[string]string) critestOutcome {
	var c critestOutcome
	seen := make(map[string]bool, len(specs))
	for _, sp := range specs {
		name := sp.name()
		seen[name] = true
		reason, listed := impossible[name]
		switch sp.State {
		case "passed":
			c.passed++
			if listed {
				c.problems = append(c.problems,
					fmt.Sprintf("listed as impossible (%s) but passes: remove it from the list: %s", reason, name))
			}
		case "skipped", "pending":
			c.skipped++
			if listed {
				c.problems = append(c.problems, fmt.Sprintf("listed as impossible but critest %s it: %s", sp.State, name))
			}
		default:
			c.failed++
			if listed {
				c.listedFailed++
				continue
			}
			c.problems = append(c.problems, fmt.Sprintf("critest spec %s: %s\n    %s\n    at %s:%d", sp.State, name,
				sp.Failure.Message, sp.Failure.Location.FileName, sp.Failure.Location.LineNumber))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(impossible)) {
		if !seen[name] {
			c.problems = append(c.problems, "listed as impossible but critest has no such spec: "+name)
		}
	}
	return c
}

// critestSpec is what the test reads of a spec in Ginkgo's JSON report.
type critestSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

// name is the spec's full text, as critest prints it without "[It]".
func (sp critestSpec) name() string {
	return strings.Join(append(slices.Clone(sp.ContainerHierarchyTexts), sp.LeafNodeText), " ")
}

// readCritestReport returns the specs (It nodes) of a Ginkgo JSON report.
func readCritestReport(path string) ([]critestSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var suites []struct{ SpecReports []critestSpec }
	if err := json.Unmarshal(b, &suites); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var specs []critestSpec
	for _, s := range suites {
		for _, sp := range s.SpecReports {
			if sp.LeafNodeType == "It" {
				specs = append(specs, sp)
			}
		}
	}
	return specs, nil
}

// readImpossible reads the list of specs a simulator cannot pass: one a
// line, "spec name | reason", with blank lines and # comments.
func readImpossible(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := make(map[string]string)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, ok := strings.Cut(line, " | ")
		name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
		if !ok || name == "" || reason == "" {
			return nil, fmt.Errorf("%s:%d: want \"spec name | reason\", got %q", path, n, line)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: %q listed twice", path, n, name)
		}
		out[name] = reason
	}
	return out, sc.Err()
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
