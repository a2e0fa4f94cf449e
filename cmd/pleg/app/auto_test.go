// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

func openCRI(ep string) (*cri.Runtime, error) {
	return cri.New(cri.Options{Endpoint: ep, RequestTimeout: 5 * time.Second})
}

// auto takes the first candidate that exists and answers Version, past a
// missing socket and a stale socket file, and logs which it took.
func TestAutoTakesTheFirstThatAnswers(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil { // a file where a socket was: nothing listens
		t.Fatal(err)
	}
	first := simtest.Start(t, sim.Options{Pods: 1, Containers: 1})
	second := simtest.Start(t, sim.Options{Pods: 3, Containers: 1})
	var logs bytes.Buffer
	a := newAutoRuntime([]string{"unix://" + dir + "/none.sock", "unix://" + stale, first.Endpoint(), second.Endpoint()},
		openCRI, slog.New(slog.NewTextHandler(&logs, nil)))
	defer func() { _ = a.Close() }() // the test's own runtime: nothing to report
	if a.Endpoint() != "" {
		t.Errorf("Endpoint before a search: %q", a.Endpoint())
	}
	pods, err := a.ListPodSandbox(context.Background(), nil)
	if err != nil || len(pods) != 1 {
		t.Fatalf("listed %d sandboxes, %v; want the first simulator's one", len(pods), err)
	}
	if a.Endpoint() != first.Endpoint() {
		t.Errorf("Endpoint %q, want %q", a.Endpoint(), first.Endpoint())
	}
	for _, want := range []string{"using the runtime found", "endpoint=" + first.Endpoint(), "runtime=pleg-sim", "none.sock: no socket", "stale.sock: "} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
	if len(a.Capabilities().Lines()) == 0 {
		t.Error("no capabilities once found")
	}
}

// With no runtime at start, every call fails saying what each candidate
// answered, and once one answers it is found: pleg run waits for its
// runtime rather than fail.
func TestAutoKeepsLooking(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "crio.sock")
	var logs bytes.Buffer
	a := newAutoRuntime([]string{"unix://" + dir + "/containerd.sock", "unix://" + link}, openCRI,
		slog.New(slog.NewTextHandler(&logs, nil)))
	defer func() { _ = a.Close() }() // the test's own runtime: nothing to report
	for range 2 {
		_, err := a.ListContainers(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "no runtime answers at any of 2 sockets") ||
			!strings.Contains(err.Error(), "containerd.sock: no socket") {
			t.Fatalf("without a runtime: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "no runtime answers yet"); n != 1 {
		t.Errorf("said %d times that nothing answers, want once:\n%s", n, logs.String())
	}
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1})
	if err := os.Symlink(strings.TrimPrefix(s.Endpoint(), "unix://"), link); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Version(context.Background()); err != nil || v.GetRuntimeName() != "pleg-sim" {
		t.Fatalf("once a runtime answers: %v %v", v, err)
	}
	if a.Endpoint() != "unix://"+link {
		t.Errorf("Endpoint %q, want the candidate's", a.Endpoint())
	}
}

// The commands take auto: a one-shot command finds the runtime or fails
// naming every candidate; pleg watch waits for one.
func TestAutoEndpointCommands(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1})
	dir := t.TempDir()
	execWith := func(candidates []string, args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		cmd := newCommand(&out, &errOut, candidates)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}
	none := "unix://" + dir + "/none.sock"
	out, _, err := execWith([]string{none, s.Endpoint()}, "version", "-r", "auto")
	if err != nil || !strings.Contains(out, "runtime: pleg-sim") || !strings.Contains(out, "at "+s.Endpoint()) {
		t.Errorf("version -r auto: %v\n%s", err, out)
	}
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "auto")
	if out, _, err := execWith([]string{s.Endpoint()}, "pods"); err != nil || strings.Count(out, "\n") < 3 {
		t.Errorf("pods with CONTAINER_RUNTIME_ENDPOINT=auto: %v\n%s", err, out)
	}
	if _, _, err := execWith([]string{none}, "pods"); err == nil || !strings.Contains(err.Error(), "none.sock: no socket") {
		t.Errorf("pods with auto and no runtime: %v", err)
	}
	_, errOut, err := execWith([]string{none}, "watch", "--wait", "300ms")
	if err == nil || !strings.Contains(errOut, "Waiting for the runtime") || !strings.Contains(err.Error(), "none.sock: no socket") {
		t.Errorf("watch with auto and no runtime: %v\n%s", err, errOut)
	}
	if _, _, err := execWith(nil, "version", "-r", "automatic"); err == nil || !strings.Contains(err.Error(), "--runtime-endpoint") {
		t.Errorf("-r automatic: %v, want refused", err)
	}
}

// pleg run with auto on a node whose runtime is not up yet: the daemon
// starts, serves, is ready and unhealthy, and turns healthy once the
// runtime answers at one of the candidates.
func TestAutoDaemonWaitsForItsRuntime(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "containerd.sock")
	a := newAutoRuntime([]string{"unix://" + link}, openCRI, slog.New(slog.DiscardHandler))
	d, err := daemon.New(daemon.Config{Runtime: a, Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + d.Addr()
	status := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !f(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("ready without a runtime", func() bool { code, _ := status("/readyz"); return code == 200 })
	if code, body := status("/healthz"); code != 500 || !strings.Contains(body, "pleg has yet to be successful") {
		t.Errorf("/healthz without a runtime: %d %q", code, body)
	}
	if _, body := status("/healthz?verbose"); !strings.Contains(body, "no runtime answers at any of 1 sockets") {
		t.Errorf("/healthz?verbose without a runtime does not say why:\n%s", body)
	}
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1})
	if err := os.Symlink(strings.TrimPrefix(s.Endpoint(), "unix://"), link); err != nil {
		t.Fatal(err)
	}
	waitFor("healthy once the runtime answers", func() bool { code, _ := status("/healthz"); return code == 200 })
	// Healthy once its lists answer; the cache is whole once the relist
	// has inspected every pod.
	waitFor("the simulator's 2 pods in the cache", func() bool {
		return !d.Cache.GlobalTime().IsZero() && len(d.Cache.GetAll()) == 2
	})
}

// auto knows cri-dockerd's socket, under /run and /var/run, after the
// runtimes whose sockets a docker node may also have.
func TestAutoKnowsCRIDockerd(t *testing.T) {
	c := autoCandidates()
	if c[len(c)-2] != "unix:///run/cri-dockerd.sock" || c[len(c)-1] != "unix:///var/run/cri-dockerd.sock" {
		t.Errorf("candidates %v: want cri-dockerd's sockets last", c)
	}
}

// pleg doctor with auto, when no runtime answers, diagnoses the first
// socket there: a hung or stopped runtime is a diagnosis, not an error.
func TestDoctorAutoDiagnosesARuntimeThatDoesNotAnswer(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "crio.sock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil { // nothing listens
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := newCommand(&out, &errOut, []string{"unix://" + dir + "/containerd.sock", "unix://" + stale})
	cmd.SetArgs([]string{"doctor", "-r", "auto", "--budget", "8s", "--node-probe=false", "--state-dir", ""})
	code := execute(context.Background(), cmd, &errOut)
	if code != 2 || !strings.Contains(out.String(), "pleg doctor: unix://"+stale) ||
		!strings.Contains(out.String(), "The container runtime does not answer") ||
		!strings.Contains(out.String(), "journalctl -u crio") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
}
