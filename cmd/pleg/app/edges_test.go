// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// lines are the non-empty lines of s.
func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// version fails when it cannot say the runtime's version.
func TestVersionFailsWithoutARuntime(t *testing.T) {
	nowhere := "unix://" + t.TempDir() + "/none.sock"
	code, out, errOut := execArgs(t, "version", "-r", nowhere)
	if code != 1 || !strings.HasPrefix(out, "pleg:") || !strings.Contains(errOut, "pleg: runtime unreachable at "+nowhere) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	s := simtest.Start(t, sim.Options{})
	if code, out, errOut := execArgs(t, "version", "-r", s.Endpoint()); code != 0 || !strings.Contains(out, "runtime: pleg-sim") {
		t.Errorf("against the simulator: exit %d, %q %q", code, out, errOut)
	}
}

// pods says what went wrong once: its error, not a log line as well.
func TestPodsSaysItsErrorOnce(t *testing.T) {
	nowhere := "unix://" + t.TempDir() + "/none.sock"
	code, _, errOut := execArgs(t, "pods", "-r", nowhere, "-t", "2s")
	if got := lines(errOut); code != 1 || len(got) != 1 || !strings.HasPrefix(got[0], "pleg: ") || !strings.Contains(got[0], "none.sock") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// A command that a signal cut short exits as a shell reports it, 128 plus
// the signal's number, without an error message; watch, whose way to end
// is Ctrl-C, exits 0.
func TestSignalledCommandsExitQuietly(t *testing.T) {
	s := simtest.Start(t, sim.Options{Pods: 2, Containers: 1})
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"pods"}, 130},
		{[]string{"version"}, 130},
		{[]string{"watch"}, 0},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(interrupted{os.Interrupt})
		var out, errOut bytes.Buffer
		cmd := NewCommand(&out, &errOut)
		cmd.SetArgs(append(tc.args, "-r", s.Endpoint()))
		if code := execute(ctx, cmd, &errOut); code != tc.code || errOut.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q; want %d and nothing said", tc.args, code, errOut.String(), tc.code)
		}
	}
}

// A runtime or a daemon that is not there is waited for with one line,
// and given up after --wait.
func TestWatchWaitsOnceAndGivesUp(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args             []string
		waiting, failure string
	}{
		{[]string{"watch", "-r", "unix://" + dir + "/none.sock", "--wait", "300ms"}, "Waiting for the runtime", "the runtime at unix://" + dir + "/none.sock has not answered for 300ms"},
		{[]string{"watch", "--server", "unix://" + dir + "/pleg.sock", "--wait", "300ms"}, "Waiting for the pleg daemon", "the daemon at unix://" + dir + "/pleg.sock has not answered for 300ms: GET /v1/events: dial unix"},
	} {
		code, _, errOut := execArgs(t, tc.args...)
		got := lines(errOut)
		if code != 1 || len(got) != 2 || !strings.Contains(got[0], tc.waiting) || !strings.Contains(got[1], tc.failure) {
			t.Errorf("%v: exit %d, stderr:\n%s", tc.args, code, errOut)
		}
	}
}

// syncBuffer is a buffer a command writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// watch prints every container already there as started, unless
// --since-now: then only what changes after its first relist.
func TestWatchSinceNow(t *testing.T) {
	for _, sinceNow := range []bool{false, true} {
		s := simtest.Start(t, sim.Options{Pods: 3, Containers: 2})
		var out, errOut syncBuffer
		cmd := NewCommand(&out, &errOut)
		args := []string{"watch", "-r", s.Endpoint(), "--mode", "generic", "--relist-period", "100ms"}
		if sinceNow {
			args = append(args, "--since-now")
		}
		cmd.SetArgs(args)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()

		// Once two relists listed the containers, --since-now's relist is
		// behind us: a pod made now is a change.
		waitFor(t, "two relists", func() bool { return s.Stats().Calls[runtime.OpListContainers] >= 2 })
		rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		if _, err := rt.Client().RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "late", Uid: "uid-late", Namespace: "test"},
			Labels:   map[string]string{"io.kubernetes.pod.name": "late", "io.kubernetes.pod.namespace": "test", "io.kubernetes.pod.uid": "uid-late"},
		}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the late pod's event", func() bool { return strings.Contains(out.String(), "test/late") })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The header, the late pod's sandbox, and without --since-now the
		// 3 sandboxes and 6 containers there at the start.
		want := 2
		if !sinceNow {
			want += 9
		}
		if got := lines(out.String()); len(got) != want {
			t.Errorf("since-now %v: %d lines, want %d:\n%s", sinceNow, len(got), want, out.String())
		}
	}
}

// waitFor polls cond until it holds; go test's -timeout bounds the wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("gave up waiting for %s", what)
		default:
		}
		sleep(t)
	}
}

func sleep(t *testing.T) {
	select {
	case <-t.Context().Done():
	case <-time.After(5 * time.Millisecond):
	}
}
