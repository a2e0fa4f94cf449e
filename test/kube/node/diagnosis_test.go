// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/plegkit/pleg/internal/testing/doccmd"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// oncall is the user the chart's diagnosis Role is bound to here: a
// person who may read pleg's diagnosis and nothing else of the node.
const oncall = "oncall@example.com"

// diagnosisWithTheRuntimeStopped turns the chart's diagnosis and host
// binary on, stops containerd (SIGSTOP), and runs the runbook's commands
// for a paged node: through the API server from a workstation (kubectl
// pleg, and kubectl get --raw), as the least-privileged user too, and on
// the node over SSH with the host's binary. The report, the recording and
// the bundle come back, timed, with the runtime stopped throughout.
func (c *cluster) diagnosisWithTheRuntimeStopped(t *testing.T, ctx context.Context, img image, in install,
	docs *docCommands,
) {
	c.buildPlugin(t, ctx)
	hostBin := t.TempDir()
	c.helmInstall(t, ctx, "upgrade", img, in, "--set", "extraArgs={--timeout=10s}",
		"--set", "diagnosis.enabled=true", "--set", "diagnosis.from[0].ipBlock.cidr="+gateway+"/32",
		"--set", "diagnosis.rbac.subjects[0].kind=User", "--set", "diagnosis.rbac.subjects[0].name="+oncall,
		"--set", "diagnosis.rbac.subjects[0].apiGroup=rbac.authorization.k8s.io",
		"--set", "flightRecorder.hostPID=true",
		"--set", "hostBinary.enabled=true", "--set", "hostBinary.hostPath="+hostBin)
	// The least privilege: the Role lets oncall read the diagnosis, and
	// nothing that would run a command on the node.
	for _, q := range []struct {
		verb, what string
		want       string
	}{
		{"get", "pods/proxy", "yes"}, {"list", "pods", "yes"},
		{"create", "pods/exec", "no"}, {"get", "nodes/proxy", "no"}, {"create", "pods/portforward", "no"},
	} {
		out, _ := c.tryRun(ctx, "kubectl", "auth", "can-i", q.verb, q.what, "-n", namespace, "--as", oncall)
		if got := strings.TrimSpace(out); got != q.want {
			t.Errorf("kubectl auth can-i %s %s --as %s: %q, want %q", q.verb, q.what, oncall, got, q.want)
		}
	}

	thaw, stopped := c.stopRuntime(t)
	defer thaw()

	// The recorder sees containerd stopped (T) on two looks 5 s apart. The
	// state directory keeps the recordings of the steps before (the
	// frozen runtime's): the one wanted began after the stop.
	var recs struct {
		Recordings []struct {
			Name string    `json:"name"`
			Time time.Time `json:"time"`
		} `json:"recordings"`
	}
	var rec string
	if err := kubetest.WaitFor(ctx, "a flight recording of the stop, through the API server", func() (bool, error) {
		out, err := c.tryRun(ctx, c.plugin, "recordings", nodeName, "-n", namespace, "-o", "json")
		if err != nil {
			return false, err
		}
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		for _, r := range recs.Recordings {
			if !r.Time.Before(stopped) {
				rec = r.Name
			}
		}
		return rec != "", fmt.Errorf("%s", out)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("recording %s listed through the API server %v after containerd stopped", rec,
		time.Since(stopped).Round(100*time.Millisecond))

	// The runbook's commands from a workstation, as written.
	work := t.TempDir()
	start := time.Now()
	out := c.shell(t, ctx, work, docs.take(t, "docs/runbook.md", "NODE=", "kubectl pleg"), c.onThisNode)
	took := time.Since(start)
	t.Logf("the runbook's kubectl pleg commands with containerd stopped took %v:\n%s", took.Round(100*time.Millisecond), out)
	for _, want := range []string{"does not answer", "stopped (T)"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl pleg's answers lack %q", want)
		}
	}
	c.checkBundle(t, filepath.Join(work, "pleg-bundle-"+nodeName+".tar.gz"))

	// The examples of the CLI's help that go through the API server.
	var help []doccmd.Command
	for _, file := range []string{"pleg doctor", "pleg doctor recordings", "pleg doctor bundle", "kubectl pleg doctor",
		"kubectl pleg recordings", "kubectl pleg bundle"} {
		help = append(help, docs.take(t, doccmd.HelpPrefix+file, "kubectl pleg")...)
	}
	start = time.Now()
	out = c.shell(t, ctx, work, help, c.onThisNode)
	t.Logf("the help's kubectl pleg examples took %v:\n%.1500s", time.Since(start).Round(100*time.Millisecond), out)

	start = time.Now()
	out = c.shell(t, ctx, work, docs.take(t, "docs/runbook.md", "NODE=", "POD=", "kubectl get --raw"), c.onThisNode)
	t.Logf("the runbook's kubectl get --raw commands took %v:\n%.2000s", time.Since(start).Round(100*time.Millisecond), out)
	if page, err := os.ReadFile(filepath.Join(work, "report.html")); err != nil || !strings.Contains(string(page), "<html") {
		t.Errorf("kubectl get --raw .../v1/doctor?format=html > report.html: %v, %.200q", err, page)
	}

	// The least-privileged user reads it too.
	start = time.Now()
	out, err := c.tryRun(ctx, c.plugin, "doctor", nodeName, "-n", namespace, "--as", oncall)
	var exit *exec.ExitError
	if unhealthy := errors.As(err, &exit) && exit.ExitCode() == 2; err != nil && !unhealthy {
		t.Errorf("kubectl pleg doctor --as %s: %v\n%s", oncall, err, out)
	}
	t.Logf("kubectl pleg doctor %s --as %s: %v, exit 2", nodeName, oncall, time.Since(start).Round(100*time.Millisecond))

	// Over SSH, with the binary the chart put on the host.
	start = time.Now()
	out = c.shell(t, ctx, work, docs.take(t, "docs/runbook.md", "/opt/pleg/bin/pleg"), func(line string) string {
		line = strings.ReplaceAll(line, "/opt/pleg/bin", hostBin)
		line = strings.ReplaceAll(line, "unix:///run/pleg/pleg.sock", "unix://"+in.socket())
		line = strings.ReplaceAll(line, "/root/pleg-bundle.tar.gz", filepath.Join(work, "host-bundle.tar.gz"))
		// This node's runtime and state directory are the test's own.
		if rest, ok := strings.CutPrefix(line, hostBin+"/pleg doctor"); ok {
			line = hostBin + "/pleg doctor" + rest + " -r " + c.runtime.Endpoint + " --state-dir " + in.stateDir
		}
		return c.onThisNode(line)
	})
	t.Logf("the runbook's commands over SSH took %v:\n%s", time.Since(start).Round(100*time.Millisecond), out)
	if !strings.Contains(out, "daemon") || !strings.Contains(out, "stopped (T)") {
		t.Errorf("pleg doctor on the host: no daemon's figures or no recording's finding")
	}
	c.checkBundle(t, filepath.Join(work, "host-bundle.tar.gz"))
	t.Logf("containerd was stopped for %v", time.Since(stopped).Round(time.Second))

	thaw()
	if err := c.WaitNode(ctx, nodeName, "PLEGDegraded False again", func(n *corev1.Node) bool {
		pc := condition(n, "PLEGDegraded")
		return pc != nil && pc.Status == corev1.ConditionFalse
	}); err != nil {
		t.Fatal(err)
	}
}

// buildPlugin builds kubectl-pleg from the checkout.
func (c *cluster) buildPlugin(t *testing.T, ctx context.Context) {
	t.Helper()
	out := filepath.Join(c.server.Dir(), "kubectl-pleg")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/kubectl-pleg")
	cmd.Dir = repoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-pleg: %v\n%s", err, b)
	}
	c.plugin = out
}

// checkBundle reads a bundle and logs its contents and size.
func (c *cluster) checkBundle(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("the bundle: %v", err)
		return
	}
	defer func() { _ = f.Close() }() // read only
	fi, _ := f.Stat()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Errorf("the bundle %s is not a gzip: %v", path, err)
		return
	}
	tr := tar.NewReader(gz)
	var files []string
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Errorf("the bundle %s: %v", path, err)
			return
		}
		_, name, _ := strings.Cut(h.Name, "/")
		files = append(files, fmt.Sprintf("%s (%d)", name, h.Size))
		total += h.Size
	}
	joined := strings.Join(files, ", ")
	for _, want := range []string{"doctor/report.json", "doctor/report.html", "recordings/", "manifest.json"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the bundle %s lacks %s: %s", filepath.Base(path), want, joined)
		}
	}
	t.Logf("bundle %s: %d bytes compressed, %d uncompressed: %s", filepath.Base(path), fi.Size(), total, joined)
}
