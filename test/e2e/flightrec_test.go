// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// onEachContainerd runs f against a private instance of each containerd
// of the matrix, in parallel subtests: the tests freeze the runtime or
// its shims, which no other test must see.
func onEachContainerd(t *testing.T, f func(t *testing.T, in *runtimetest.Instance)) {
	for _, spec := range matrix(t) {
		if spec.Kind != runtimetest.Containerd {
			continue
		}
		t.Run(spec.String(), func(t *testing.T) {
			t.Parallel()
			f(t, privateRuntime(t, spec))
		})
	}
}

// freeze stops pid with SIGSTOP until the test ends, when it is
// resumed, whatever happened.
func freeze(t *testing.T, pid int) time.Time {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	t.Cleanup(func() {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("resuming %d: %v", pid, err)
		}
	})
	return at
}

// shimOf finds the shim of the instance's sandbox: the
// containerd-shim-runc-v2 process whose command line names its socket
// and the sandbox.
func shimOf(t *testing.T, in *runtimetest.Instance, sandbox string) int {
	t.Helper()
	socket := strings.TrimPrefix(in.Endpoint, "unix://")
	return processOf(t, "shim of sandbox "+sandbox, func(comm, cmdline string) bool {
		return strings.HasPrefix(comm, "containerd-shim") && strings.Contains(cmdline, socket) && strings.Contains(cmdline, sandbox)
	})
}

// processOf is the first process whose comm and command line (arguments
// joined by spaces) match.
func processOf(t *testing.T, what string, match func(comm, cmdline string) bool) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if match(strings.TrimSpace(string(comm)), strings.ReplaceAll(string(cmdline), "\x00", " ")) {
			return pid
		}
	}
	t.Fatalf("no %s found", what)
	return 0
}

// startRecordingDaemon starts pleg run with its flight recorder on the
// instance's debug socket; the health threshold is short, so that a
// third of it passes within the test.
func startRecordingDaemon(t *testing.T, in *runtimetest.Instance) (*daemonProcess, string) {
	t.Helper()
	dir := daemonDir(t)
	d := startDaemonIn(t, in, dir, "--relist-threshold", "6s", "--flight-recorder-debug-socket", in.DebugSocket(),
		"--flight-recorder-min-interval", "1s")
	return d, filepath.Join(dir, "state")
}

// waitRecording waits for the daemon to list a recording and returns it,
// read through the API.
func waitRecording(t *testing.T, d *daemonProcess) *flightrec.Recording {
	t.Helper()
	var list api.RecordingList
	wait(t, "a recording", func() bool {
		resp, err := d.get("/v1/recordings")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&list) == nil && len(list.Recordings) > 0
	})
	name := list.Recordings[0].Name
	resp, err := d.get("/v1/recordings/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/recordings/%s: %d %v\n%s", name, resp.StatusCode, err, b)
	}
	rec, err := flightrec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Host != nil && len(rec.Host.HungMounts) > 0 {
		t.Errorf("mounts reported not answering on a host where none hangs: %q", rec.Host.HungMounts)
	}
	t.Logf("recording %s: %d bytes, trigger %s (%s); complete %v after the trigger, taken in %v", name,
		list.Recordings[0].Bytes, rec.Trigger, rec.Reason, rec.Finished.Sub(rec.Onset).Round(time.Millisecond),
		rec.Finished.Sub(rec.Started).Round(time.Millisecond))
	return rec
}

// processIn is the process pid in the recording.
func processIn(rec *flightrec.Recording, pid int) (flightrec.Process, bool) {
	if rec.Processes == nil {
		return flightrec.Process{}, false
	}
	for _, p := range rec.Processes.List {
		if p.Pid == pid {
			return p, true
		}
	}
	return flightrec.Process{}, false
}

func partOf(rec *flightrec.Recording, name string) flightrec.Part {
	for _, p := range rec.Parts {
		if p.Name == name {
			return p
		}
	}
	return flightrec.Part{}
}

// doctorReads runs pleg doctor recordings on the state directory and
// returns what it found; its exit status is the verdict's.
func doctorReads(t *testing.T, stateDir, name string) *render.RecordingView {
	t.Helper()
	bin, err := plegBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "doctor", "recordings", name, "--state-dir", stateDir, "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("pleg doctor recordings: %v\n%s", err, stderr.String())
	}
	var v render.RecordingView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("pleg doctor recordings -o json: %v\n%s\n%s", err, out, stderr.String())
	}
	if got, want := cmd.ProcessState.ExitCode(), v.Verdict.ExitCode(); got != want {
		t.Errorf("pleg doctor recordings exited %d, want %d for %s", got, want, v.Verdict)
	}
	for _, f := range v.Findings {
		t.Logf("doctor: [%s] %s", f.Severity, f.Title)
	}
	return &v
}

// usage reads a process's CPU seconds and resident bytes.
func usage(pid int) (float64, int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return (ut + st) / 100, rss * int64(os.Getpagesize())
}

func findingOf(v *render.RecordingView, id, inTitle string) bool {
	for _, f := range v.Findings {
		if f.ID == id && strings.Contains(f.Title, inTitle) {
			return true
		}
	}
	return false
}

// TestFlightRecShimFrozen freezes the shim of a pod's sandbox: containerd
// answers, pleg's calls do not hang (containerd serves them from its own
// store), and the recorder sees the shim stopped on two looks in a row.
// The recording names the shim in state T and holds containerd's stacks,
// and pleg doctor reads it back with the finding.
func TestFlightRecShimFrozen(t *testing.T) {
	onEachContainerd(t, func(t *testing.T, in *runtimetest.Instance) {
		pod := newPod("frozen-shim")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		_, err = in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		d, stateDir := startRecordingDaemon(t, in)
		shim := shimOf(t, in, sb)
		cpu0, _ := usage(d.cmd.Process.Pid)
		frozen := freeze(t, shim)

		rec := waitRecording(t, d)
		appeared := time.Since(frozen)
		cpu1, rss := usage(d.cmd.Process.Pid)
		t.Logf("shim %d frozen: recording listed %v after SIGSTOP (the stuck-process trigger takes two looks 5 s "+
			"apart); the daemon used %.2f s of CPU meanwhile, RSS %d MiB", shim, appeared.Round(time.Millisecond),
			cpu1-cpu0, rss>>20)
		p, ok := processIn(rec, shim)
		if !ok || p.State != "T" || p.Role != "shim" {
			t.Errorf("the frozen shim %d in the recording: %+v (found %t), want a shim in state T", shim, p, ok)
		}
		if rec.Runtime == nil || !strings.Contains(rec.Runtime.Stacks, "goroutine ") {
			t.Errorf("no goroutine stacks of containerd, which answers: part %+v", partOf(rec, flightrec.PartRuntimeStacks))
		}
		if rec.Runtime.Pid != in.Pid() {
			t.Errorf("the runtime's pid %d, want containerd's %d", rec.Runtime.Pid, in.Pid())
		}
		v := doctorReads(t, stateDir, rec.Name)
		if !findingOf(v, "shim-stopped", fmt.Sprintf("(pid %d) of sandbox", shim)) {
			t.Errorf("pleg doctor's findings %+v: want the shim %d stopped", v.Findings, shim)
		}
	})
}

// TestFlightRecContainerdFrozen freezes containerd itself: pleg's relist
// hangs, containerd's debug socket accepts and never answers, and the
// recording still comes, with containerd in state T and the stacks' probe
// cut at its deadline.
func TestFlightRecContainerdFrozen(t *testing.T) {
	onEachContainerd(t, func(t *testing.T, in *runtimetest.Instance) {
		pod := newPod("frozen-containerd")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		_, err = in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		d, stateDir := startRecordingDaemon(t, in)
		pid := in.Pid()
		cpu0, _ := usage(d.cmd.Process.Pid)
		frozen := freeze(t, pid)

		rec := waitRecording(t, d)
		appeared := time.Since(frozen)
		cpu1, rss := usage(d.cmd.Process.Pid)
		t.Logf("containerd %d frozen: recording listed %v after SIGSTOP; the daemon used %.2f s of CPU meanwhile, "+
			"RSS %d MiB", pid, appeared.Round(time.Millisecond), cpu1-cpu0, rss>>20)
		p, ok := processIn(rec, pid)
		if !ok || p.State != "T" || p.Role != "runtime" {
			t.Errorf("containerd %d in the recording: %+v (found %t), want the runtime in state T", pid, p, ok)
		}
		if st := partOf(rec, flightrec.PartRuntimeStacks); !st.TimedOut {
			t.Errorf("the stacks' probe of a stopped containerd: %+v, want it cut at its deadline", st)
		}
		for _, name := range []string{flightrec.PartPleg, flightrec.PartProcesses, flightrec.PartHost} {
			if p := partOf(rec, name); p.TimedOut || p.Error != "" {
				t.Errorf("part %s: %+v, want it kept", name, p)
			}
		}
		v := doctorReads(t, stateDir, rec.Name)
		if !findingOf(v, "runtime-stopped", fmt.Sprintf("containerd (pid %d) is stopped (T): resume it with kill -CONT %d", pid, pid)) {
			t.Errorf("pleg doctor's findings %+v: want containerd itself stopped", v.Findings)
		}
	})
}

// conmonOf finds the conmon of a CRI-O container: the one whose command
// line names it.
func conmonOf(t *testing.T, id string) int {
	t.Helper()
	return processOf(t, "conmon of container "+id, func(comm, cmdline string) bool {
		return comm == "conmon" && strings.Contains(cmdline, id)
	})
}

// TestFlightRecCRIOStacks freezes a container's conmon on CRI-O with
// CRI-O's stack dump opted in: the recording names conmon stopped and
// holds CRI-O's goroutine stacks, which it wrote on SIGUSR1.
func TestFlightRecCRIOStacks(t *testing.T) {
	var spec *runtimetest.Spec
	for _, s := range matrix(t) {
		if s.Kind == runtimetest.CRIO {
			spec = &s
			break
		}
	}
	if spec == nil {
		t.Skip("no CRI-O in the matrix")
	}
	in := privateRuntime(t, *spec)
	before, _ := filepath.Glob("/tmp/crio-goroutine-stacks-*.log")
	t.Cleanup(func() {
		// CRI-O's dumps the test asked for: the recorder leaves them, as
		// files of the runtime's.
		after, _ := filepath.Glob("/tmp/crio-goroutine-stacks-*.log")
		for _, f := range after {
			if !slices.Contains(before, f) {
				_ = os.Remove(f)
			}
		}
	})
	pod := newPod("frozen-conmon")
	sb, err := in.RunPod(ctx(t), pod)
	must(t, err)
	id, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
	must(t, err)
	dir := daemonDir(t)
	d := startDaemonIn(t, in, dir, "--flight-recorder-crio-stacks", "--flight-recorder-min-interval", "1s")
	conmon := conmonOf(t, id)
	frozen := freeze(t, conmon)

	rec := waitRecording(t, d)
	t.Logf("conmon %d frozen: recording listed %v after SIGSTOP", conmon, time.Since(frozen).Round(time.Millisecond))
	if p, ok := processIn(rec, conmon); !ok || p.State != "T" || p.Role != "shim" {
		t.Errorf("the frozen conmon %d in the recording: %+v (found %t), want a shim in state T", conmon, p, ok)
	}
	if rec.Runtime == nil || !strings.Contains(rec.Runtime.Stacks, "goroutine ") ||
		!strings.Contains(rec.Runtime.StacksSource, "CRI-O") {
		t.Errorf("no goroutine stacks of CRI-O: part %+v", partOf(rec, flightrec.PartRuntimeStacks))
	} else {
		t.Logf("CRI-O's stacks: %d bytes, from %s", len(rec.Runtime.Stacks), rec.Runtime.StacksSource)
	}
	v := doctorReads(t, filepath.Join(dir, "state"), rec.Name)
	if !findingOf(v, "shim-stopped", fmt.Sprintf("The shim conmon (pid %d)", conmon)) {
		t.Errorf("pleg doctor's findings %+v: want conmon stopped", v.Findings)
	}
}
