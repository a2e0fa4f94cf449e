// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/internal/testing/doccmd"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// simSocket is the socket the docs serve the simulator on, and
// daemonSocket the chart's API socket on a node; each block gets sockets
// of its own in their place.
const (
	simSocket    = "/tmp/sim.sock"
	daemonSocket = "/run/pleg/pleg.sock"
)

// TestDocCommands runs the commands of README.md and docs/ that are
// test/docs' (internal/testing/doccmd.Assignments) as they are written, the
// commands of one block in order, in bash, with a pleg built from this
// tree first on PATH. What it changes, and why:
//   - /tmp/sim.sock is a socket of the block's, so that runs do not meet;
//   - a command that follows or serves until interrupted (pleg sim, pleg
//     run, pleg watch --since-now) runs until what it shows has been seen,
//     then is interrupted, as a reader would;
//   - a block that reaches the simulator without starting one gets the
//     simulator the page started earlier: `pleg sim` with its defaults;
//   - pleg run finds that simulator by CONTAINER_RUNTIME_ENDPOINT, as on
//     a node it finds the runtime's socket;
//   - a block that asks the chart's daemon (/run/pleg/pleg.sock) gets a
//     pleg run, with a state directory, over that simulator.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("the demos take 30 s; run without -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := doccmd.For(root, doccmd.ByDocs)
	if err != nil {
		t.Fatal(err)
	}
	// The blocks run in parallel, after this function returns.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)

	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, "pleg"), "./cmd/pleg")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pleg: %v\n%s", err, out)
	}
	tools, err := runtimetest.Critest(ctx, t.Logf)
	if err != nil {
		t.Fatalf("crictl %s, which the docs show, could not be built: %v", runtimetest.CritestVersion, err)
	}
	if err := os.Symlink(tools.Crictl, filepath.Join(bin, "crictl")); err != nil {
		t.Fatal(err)
	}
	env := &shell{root: root, path: bin + string(os.PathListSeparator) + os.Getenv("PATH")}

	// The commands that build ./pleg in the tree write the same file: one
	// after another, before the rest.
	var blocks [][]doccmd.Command
	for _, c := range cmds {
		if buildsTree.MatchString(c.Text) {
			t.Run(name(c), func(t *testing.T) { env.buildTree(t, ctx, c) })
			continue
		}
		if n := len(blocks); n > 0 && blocks[n-1][0].File == c.File && blocks[n-1][0].Block == c.Block {
			blocks[n-1] = append(blocks[n-1], c)
			continue
		}
		blocks = append(blocks, []doccmd.Command{c})
	}
	seen := map[string]bool{}
	for _, b := range blocks {
		key := ""
		for _, c := range b {
			key += c.Text + "\n"
		}
		if seen[key] { // README's first commands are docs/testing.md's too
			continue
		}
		seen[key] = true
		t.Run(fmt.Sprintf("%s:%d", b[0].File, b[0].Block), func(t *testing.T) {
			t.Parallel()
			env.runBlock(t, ctx, b)
		})
	}
}

// watchShows is pleg watch's header and an event under it.
var watchShows = regexp.MustCompile(`(?ms)^TIME\s+TYPE\s+NAMESPACE/POD\s+CONTAINER\n.*^\S+\s+Container\w+\s`)

var buildsTree = regexp.MustCompile(`^(go build \./cmd/pleg|make build)$`)

func name(c doccmd.Command) string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

// shell runs commands in bash from the repository's root.
type shell struct {
	root, path string
}

func (s *shell) command(ctx context.Context, text string, extraEnv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), append([]string{"PATH=" + s.path}, extraEnv...)...)
	// Interrupted as a whole: bash, and what it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// buildTree runs go build or make build, which write ./pleg, and runs
// what they built.
func (s *shell) buildTree(t *testing.T, ctx context.Context, c doccmd.Command) {
	out, err := s.command(ctx, c.Text).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", c, err, out)
	}
	v, err := exec.CommandContext(ctx, filepath.Join(s.root, "pleg"), "version", "-r", "unix:///nonexistent.sock", "-t", "1s").CombinedOutput()
	if !strings.HasPrefix(string(v), "pleg:") {
		t.Errorf("%s: ./pleg version: %v\n%s", c, err, v)
	}
}

// background is a command that runs until interrupted.
type background struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when it ended, with err set
	err  error
}

func (s *shell) start(t *testing.T, ctx context.Context, text string, extraEnv ...string) *background {
	t.Helper()
	b := &background{cmd: s.command(ctx, text, extraEnv...), out: &syncBuffer{}, done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { b.stop() })
	return b
}

// stop interrupts it, as Ctrl-C would.
func (b *background) stop() {
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
}

// waitFor waits until cond holds or the command ends.
func (b *background) waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-b.done:
			if cond() {
				return
			}
			t.Fatalf("%s ended (%v) before %s:\n%s", b.cmd.Args[2], b.err, what, b.out.String())
		case <-ctx.Done():
			t.Fatalf("%s: no %s: %v\n%s", b.cmd.Args[2], what, ctx.Err(), b.out.String())
		case <-tick.C:
		}
	}
}

// runBlock runs the commands of one block in order.
func (s *shell) runBlock(t *testing.T, ctx context.Context, block []doccmd.Command) {
	dir := t.TempDir()
	sock, api := filepath.Join(dir, "sim.sock"), filepath.Join(dir, "pleg.sock")
	// The help's files in /tmp (pages, bundles, a recording copied off a
	// node) and the init container's /host-bin are the block's own.
	local := func(text string) string {
		return strings.NewReplacer(simSocket, sock, daemonSocket, api, "/tmp/", dir+"/", "/host-bin/", dir+"/").
			Replace(text)
	}
	startSim := func(text string) {
		sim := s.start(t, ctx, strings.TrimSuffix(strings.TrimSpace(local(text)), "&"))
		sim.waitFor(t, ctx, "its socket", func() bool { _, err := os.Stat(sock); return err == nil })
	}
	simStarted, daemonStarted := false, false
	for _, c := range block {
		text := local(c.Text)
		switch {
		case strings.HasPrefix(c.Text, "pleg sim "):
			startSim(c.Text)
			simStarted = true
			continue
		case (strings.Contains(c.Text, simSocket) || strings.HasPrefix(c.Text, "pleg run ") ||
			strings.Contains(c.Text, daemonSocket)) && !simStarted:
			startSim("pleg sim --socket " + simSocket)
			simStarted = true
		}
		if strings.Contains(c.Text, daemonSocket) && !daemonStarted {
			d := s.start(t, ctx, fmt.Sprintf("pleg run --runtime-endpoint unix://%s --listen unix://%s --state-dir %s",
				sock, api, filepath.Join(dir, "state")))
			d.waitFor(t, ctx, "its API socket", func() bool { _, err := os.Stat(api); return err == nil })
			daemonStarted = true
		}
		t.Logf("%s", c)
		if err := copiedOffTheNode(c.Text, text); err != nil {
			t.Fatal(err)
		}
		if err := s.check(t, ctx, c, text, sock); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}

// copiedOffTheNode puts a recording where a command reads one copied off a
// node (pleg doctor recordings --file): a pleg call in flight for 70 s.
func copiedOffTheNode(doc, text string) error {
	if !strings.Contains(doc, "recordings --file ") {
		return nil
	}
	fields := strings.Fields(text)
	onset := time.Date(2026, 11, 26, 21, 22, 33, 123e6, time.UTC)
	b, err := json.Marshal(&flightrec.Recording{
		Version: flightrec.FormatVersion, Name: "20261126T212233.123Z-slow-call", Trigger: flightrec.TriggerSlowCall,
		Reason: "list_containers in flight for 1m10s", Onset: onset, Started: onset, Finished: onset,
		Pleg: &flightrec.PlegView{InFlight: []flightrec.Call{{Op: "list_containers", Start: onset, Seconds: 70}}},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(fields[len(fields)-1], b, 0o600)
}

// check runs one command and checks that it did what its page says.
func (s *shell) check(t *testing.T, ctx context.Context, c doccmd.Command, text, sock string) error {
	switch {
	case strings.HasPrefix(c.Text, "pleg run "):
		// It serves until stopped; the block's next command asks it.
		s.start(t, ctx, text, "CONTAINER_RUNTIME_ENDPOINT=unix://"+sock)
		return nil
	case strings.HasPrefix(c.Text, "curl "):
		// pleg run, just started, answers once its first relist is done.
		deadline := time.NewTicker(100 * time.Millisecond)
		defer deadline.Stop()
		for {
			out, err := s.command(ctx, text).CombinedOutput()
			if err == nil && strings.Contains(string(out), "200 OK") {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("no 200 OK: %w\n%s", err, out)
			case <-deadline.C:
			}
		}
	case strings.Contains(c.Text, "--since-now"):
		w := s.start(t, ctx, text)
		w.waitFor(t, ctx, "an event under its header", func() bool {
			return watchShows.MatchString(w.out.String())
		})
		return nil
	}
	out, err := s.command(ctx, text).CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return err
	}
	for _, e := range expectations {
		if !e.cmd.MatchString(c.Text) {
			continue
		}
		if !e.exit(code) {
			return fmt.Errorf("exit code %d\n%s", code, out)
		}
		if !e.out.Match(out) {
			return fmt.Errorf("its output does not match %s:\n%s", e.out, out)
		}
		return nil
	}
	return fmt.Errorf("test/docs runs it, but knows nothing of what it should show (add it to expectations)")
}

// expectations are what each command run to its end shows, as its page
// shows it.
var expectations = []struct {
	cmd  *regexp.Regexp
	exit func(int) bool
	out  *regexp.Regexp
}{
	{regexp.MustCompile(`^(go run \./cmd/pleg demo|make demo)`), zero, regexp.MustCompile(`(?m)^done for \d+s$`)},
	{regexp.MustCompile(`^pleg watch -r unix:///run/nothing\.sock --wait 30s$`), nonZero,
		regexp.MustCompile(`has not answered for 30s`)},
	{regexp.MustCompile(`^pleg pods `), zero, regexp.MustCompile(`^NAME\s+ID\s+STATE\s+ATTEMPT\s+CREATED\s+INFO\n`)},
	// The flight recorder's recordings: none on this machine, where no
	// pleg run has had an incident (test/e2e's TestFlightRec* read real
	// ones).
	{regexp.MustCompile(`^pleg doctor recordings( latest)?( --html \S+)?$`), func(c int) bool { return c <= 2 },
		regexp.MustCompile(`(?s)^(no recordings\n|NAME\s+TRIGGER|Recording |pleg: no recordings in )`)},
	// A recording copied off a node: the renderer's golden one.
	{regexp.MustCompile(`^pleg doctor recordings --file `), func(c int) bool { return c <= 2 },
		regexp.MustCompile(`(?s)^Recording .*\nFindings`)},
	// The bundle: written whatever the runtime answers, and told.
	{regexp.MustCompile(`^pleg doctor bundle `), zero,
		regexp.MustCompile(`(?m)^pleg doctor bundle: \S+pleg-bundle\.tar\.gz, \d+ bytes: doctor/report\.json, `)},
	{regexp.MustCompile(`^pleg doctor .*-o json$`), func(c int) bool { return c <= 2 },
		regexp.MustCompile(`(?s)^\{\n.*"verdict": `)},
	// doctor's exit code is its verdict: 2, 1 or 0.
	{regexp.MustCompile(`^pleg doctor( |$)`), func(c int) bool { return c <= 2 }, regexp.MustCompile(`(?s)^pleg doctor: .*\nVerdict: `)},
	{regexp.MustCompile(`^pleg install `), zero, regexp.MustCompile(`(?m)^pleg \S+ installed at /`)},
	{regexp.MustCompile(`^pleg version -r unix:///tmp/sim\.sock$`), zero, regexp.MustCompile(`(?m)^runtime: pleg-sim .* at unix://`)},
	{regexp.MustCompile(`^pleg version -r unix:///run/nothing\.sock$`), nonZero, regexp.MustCompile(`runtime unreachable at unix:///run/nothing\.sock`)},
	// The simulator's pods are sim/sim-N: the page's pod has no history
	// there, and the table is its header alone.
	{regexp.MustCompile(`^pleg history data/db-0 `), zero, regexp.MustCompile(`(?m)^TIME\s+TYPE\s+POD\s+CONTAINER\s+EXIT\s+REASON\s+SEQ$`)},
	{regexp.MustCompile(`^crictl .* pods$`), zero, regexp.MustCompile(`(?m)^POD ID\s+CREATED\s+STATE\s+NAME\s+NAMESPACE`)},
}

func zero(c int) bool    { return c == 0 }
func nonZero(c int) bool { return c != 0 }

// syncBuffer is a bytes.Buffer a command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
