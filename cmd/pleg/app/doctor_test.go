// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/internal/safefile"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// execArgs runs the pleg command as main does and returns its exit code
// and output.
func execArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs(args)
	return execute(context.Background(), cmd, &errOut), out.String(), errOut.String()
}

// The exit status is the verdict's, as pleg doctor --help documents. A
// diagnosis times real calls, and a busy machine makes them slow (a
// finding in itself): the verdicts below are those the figures that do
// not depend on the machine's speed make at least.
func TestDoctorExitStatus(t *testing.T) {
	report := func(t *testing.T, out string) doctor.Report {
		t.Helper()
		var r doctor.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("-o json: %v\n%s", err, out)
		}
		return r
	}
	healthy := simtest.Start(t, sim.Options{Pods: 3, Containers: 2})
	code, out, errOut := execArgs(t, "doctor", "-r", healthy.Endpoint(), "--budget", "20s", "-o", "json", "--node-probe=false")
	if r := report(t, out); code != r.Verdict.ExitCode() || r.Verdict == doctor.Unhealthy || errOut != "" {
		t.Errorf("healthy runtime: exit %d, verdict %s, findings %+v\n%s", code, r.Verdict, r.Findings, errOut)
	}

	piled := simtest.Start(t, sim.Options{Pods: 20, Containers: 1, Exited: 60})
	code, out, _ = execArgs(t, "doctor", "-r", piled.Endpoint(), "--sample", "2", "-o", "json", "--node-probe=false")
	r := report(t, out)
	dead := slices.ContainsFunc(r.Findings, func(f doctor.Finding) bool { return f.ID == "dead-containers" })
	if code != r.Verdict.ExitCode() || code < 1 || !dead {
		t.Errorf("1,200 exited containers: exit %d, verdict %s, findings %+v", code, r.Verdict, r.Findings)
	}

	page := filepath.Join(t.TempDir(), "report.html")
	nowhere := "unix://" + t.TempDir() + "/none.sock"
	code, out, _ = execArgs(t, "doctor", "-r", nowhere, "--html", page, "--node-probe=false")
	if code != 2 || !strings.Contains(out, "Verdict: UNHEALTHY") || !strings.Contains(out, "The container runtime does not answer") {
		t.Errorf("unreachable runtime: exit %d\n%s", code, out)
	}
	if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), "The container runtime does not answer") {
		t.Errorf("--html: %v", err)
	}

	// A diagnosis that cannot run is no better than an unhealthy one; other
	// commands keep exit status 1 for errors.
	if code, _, errOut := execArgs(t, "doctor", "--budget", "-1s", "-r", nowhere); code != 2 || !strings.Contains(errOut, "budget -1s must be positive") {
		t.Errorf("bad flag: exit %d, %q", code, errOut)
	}
	if code, _, errOut := execArgs(t, "doctor", "--html", filepath.Join(t.TempDir(), "no", "dir", "x.html"), "-r", nowhere); code != 2 || !strings.Contains(errOut, "--html") {
		t.Errorf("unwritable --html: exit %d, %q", code, errOut)
	}
	if code, _, _ := execArgs(t, "pods", "--relist-period", "0s", "-r", nowhere); code != 1 {
		t.Errorf("pods with a bad flag: exit %d, want 1", code)
	}

	_, help, _ := execArgs(t, "doctor", "--help")
	for _, want := range []string{"Exit status:", "0  healthy", "1  at risk", "2  unhealthy"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// Issue 22 found that doctor --html followed a symbolic link when it
// created its page: doctor runs as root, and a link left in /tmp by
// another user would have it overwrite any file. A link is refused and
// its target left alone; a regular file is replaced.
func TestDoctorHTMLNeverWritesThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious")
	if err := os.WriteFile(precious, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	if err := os.Symlink(precious, page); err != nil {
		t.Fatal(err)
	}
	write := func(w io.Writer) error { _, err := io.WriteString(w, "<html>report</html>"); return err }
	if err := safefile.Write(page, 0o644, write); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("writing through a symbolic link: %v, want refused", err)
	}
	if data, err := os.ReadFile(precious); err != nil || string(data) != "keep" {
		t.Errorf("the link's target: %q %v, want untouched", data, err)
	}

	old := filepath.Join(dir, "old.html")
	if err := os.WriteFile(old, []byte("an older report"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := safefile.Write(old, 0o644, write); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(old); err != nil || string(data) != "<html>report</html>" {
		t.Errorf("the replaced report: %q %v", data, err)
	}
	if err := safefile.Write(old, 0o644, func(io.Writer) error { return errors.New("render failed") }); err == nil {
		t.Error("a failed render succeeded")
	}
	if data, _ := os.ReadFile(old); string(data) != "<html>report</html>" {
		t.Errorf("a failed render changed the report already there: %q", data)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("files left beside the report: %v", entries)
	}
}

// In pleg's pod the chart sets CONTAINER_RUNTIME_ENDPOINT and the root
// filesystem is read-only: doctor, without -r, diagnoses the runtime the
// environment names, and --html - writes the page, whole, to the standard
// output, with the report on the standard error.
func TestDoctorInThePod(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1})
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", s.Endpoint())
	code, out, errOut := execArgs(t, "doctor", "--budget", "20s", "--html", "-", "--node-probe=false")
	if code == 2 || !strings.HasPrefix(out, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(out), "</html>") {
		t.Errorf("--html -: exit %d, stdout starts %q, ends %q", code, head(out, 40), tail(out, 40))
	}
	if strings.Contains(out, "Verdict:") || !strings.Contains(errOut, "Verdict: ") {
		t.Errorf("--html -: the text report must go to stderr alone; stderr:\n%s", errOut)
	}
	if !strings.Contains(out, "pleg-sim") {
		t.Error("--html -: the page does not name the runtime the environment points at")
	}
	_, help, _ := execArgs(t, "doctor", "--help")
	if !strings.Contains(help, `"-" writes the page to the standard output`) {
		t.Errorf("--help does not tell --html -:\n%s", help)
	}
}

// Every command that talks to the runtime takes its endpoint from
// CONTAINER_RUNTIME_ENDPOINT when -r is not given, as crictl does.
func TestEveryCommandHonoursTheEnvironmentsEndpoint(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1})
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", s.Endpoint())
	if code, out, errOut := execArgs(t, "version"); code != 0 || !strings.Contains(out, "runtime: pleg-sim") {
		t.Errorf("version: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut := execArgs(t, "pods"); code != 0 || strings.Count(out, "\n") < 3 {
		t.Errorf("pods: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ := execArgs(t, "doctor", "--budget", "20s", "-o", "json", "--node-probe=false")
	var r doctor.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || code == 2 || !strings.Contains(out, "pleg-sim") {
		t.Errorf("doctor: exit %d, %v\n%s", code, err, out)
	}
	// watch: one that cannot reach the environment's endpoint says which.
	nowhere := "unix://" + t.TempDir() + "/none.sock"
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", nowhere)
	if code, _, errOut := execArgs(t, "watch", "--wait", "300ms"); code != 1 || !strings.Contains(errOut, "the runtime at "+nowhere) {
		t.Errorf("watch: exit %d, %q", code, errOut)
	}
}

func head(s string, n int) string { return s[:min(n, len(s))] }
func tail(s string, n int) string { return s[max(0, len(s)-n):] }
