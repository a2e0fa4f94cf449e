// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/flightrec"
)

// stacks is a goroutine dump (debug=2) with n goroutines waiting on the
// lock taken in (*store).Get, one on another lock and one running.
func stacks(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "goroutine %d [sync.Mutex.Lock, 3 minutes]:\n"+
			"internal/sync.runtime_SemacquireMutex(0xc0001, 0x0, 0x1)\n\t/usr/local/go/src/runtime/sema.go:95 +0x25\n"+
			"sync.(*Mutex).Lock(...)\n\t/usr/local/go/src/sync/mutex.go:46\n"+
			"github.com/containerd/containerd/v2/internal/cri/store/container.(*Store).Get(0xc00012, {0xc0003, 0x40})\n"+
			"\t/src/internal/cri/store/container/container.go:140 +0x5b\n"+
			"created by google.golang.org/grpc.(*Server).serveStreams in goroutine 1\n\t/src/server.go:1000 +0x1\n\n", 10+i)
	}
	b.WriteString("goroutine 5 [semacquire]:\nsync.runtime_Semacquire(0x1)\n\t/x.go:1\n" +
		"sync.(*WaitGroup).Wait(0x1)\n\t/x.go:2\nmain.other()\n\t/main.go:3\n\n")
	b.WriteString("goroutine 1 [running]:\nmain.main()\n\t/main.go:1 +0x1\n")
	return b.String()
}

func TestRecordingFindings(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	proc := func(pid int, role, comm, state, wchan string) flightrec.Process {
		return flightrec.Process{Pid: pid, PPid: 1, Role: role, Comm: comm, State: state, WChan: wchan}
	}
	for _, tc := range []struct {
		name string
		rec  flightrec.Recording
		want map[string]string // finding ID: a part of its title
		sev  Severity          // of the first
	}{
		{"a stopped shim", flightrec.Recording{Processes: &flightrec.Processes{List: []flightrec.Process{
			proc(100, "runtime", "containerd", "S", "ep_poll"), proc(200, "shim", "containerd-shim", "T", "do_signal_stop"),
		}}}, map[string]string{"recording-process-stopped": "shim containerd-shim (pid 200) is stopped (T)"}, Critical},
		{"the runtime stopped", flightrec.Recording{Processes: &flightrec.Processes{List: []flightrec.Process{
			proc(100, "runtime", "containerd", "T", "do_signal_stop"),
		}}}, map[string]string{"recording-process-stopped": "the runtime containerd itself is stopped (T): pid 100"}, Critical},
		{"a shim in D on a hung mount", flightrec.Recording{
			Processes: &flightrec.Processes{List: []flightrec.Process{proc(200, "shim", "conmon", "D", "nfs_wait_bit_killable")}},
			Host:      &flightrec.Host{HungMounts: []string{"/mnt/nfs"}, MountsChecked: 30},
		}, map[string]string{
			"recording-process-d-state": "shim conmon (pid 200) is in uninterruptible sleep (D) in nfs_wait_bit_killable while mount /mnt/nfs does not answer",
			"recording-hung-mount":      "mount /mnt/nfs does not answer a stat",
		}, Critical},
		{"a container's process in D is a warning", flightrec.Recording{Processes: &flightrec.Processes{List: []flightrec.Process{
			proc(300, "child", "app", "D", "io_schedule"),
		}}}, map[string]string{"recording-process-d-state": "child app (pid 300)"}, Warning},
		{"goroutines on one lock", flightrec.Recording{Runtime: &flightrec.RuntimeState{Stacks: stacks(12), StacksSource: "debug"}},
			map[string]string{"recording-lock-contention": "12 of them at github.com/containerd/containerd/v2/internal/cri/store/container.(*Store).Get"},
			Critical},
		{"one thread in D of a sleeping runtime is no finding", flightrec.Recording{Processes: &flightrec.Processes{List: []flightrec.Process{
			{Pid: 100, Role: "runtime", Comm: "crio", State: "S", WChan: "do_epoll_wait", ThreadsD: 1},
		}}}, map[string]string{}, ""},
		{"threads in D of a sleeping runtime", flightrec.Recording{Processes: &flightrec.Processes{List: []flightrec.Process{
			{Pid: 100, Role: "runtime", Comm: "crio", State: "S", WChan: "do_epoll_wait", ThreadsD: 4},
		}}}, map[string]string{"recording-process-d-state": "4 threads of the runtime crio itself (pid 100) were in uninterruptible sleep (D)"}, Warning},
		{"a few goroutines on a lock are no finding", flightrec.Recording{Runtime: &flightrec.RuntimeState{Stacks: stacks(3)}},
			map[string]string{}, ""},
		{"io pressure", flightrec.Recording{Host: &flightrec.Host{Pressure: map[string]flightrec.Pressure{
			"io": {SomeAvg10: 82.4}, "cpu": {SomeAvg10: 25}, "memory": {SomeAvg10: 1},
		}}}, map[string]string{"recording-pressure": "io pressure was 82% at onset"}, Critical},
		{"the kernel log", flightrec.Recording{Host: &flightrec.Host{KernelLog: []string{"[1.0] INFO: task x blocked for more than 120 seconds."}}},
			map[string]string{"recording-kernel-log": "the kernel logged 1 lines"}, Warning},
		{"a hung call and a probe cut", flightrec.Recording{
			Pleg:  &flightrec.PlegView{InFlight: []flightrec.Call{{Op: "list_podsandbox", Start: t0, Seconds: 61}}},
			Parts: []flightrec.Part{{Name: flightrec.PartRuntimeStacks, TimedOut: true}, {Name: flightrec.PartHost}},
		}, map[string]string{
			"recording-call-in-flight":  "list_podsandbox had been in flight for 61.0 s",
			"recording-probe-timed-out": "the runtime's debug socket did not answer",
		}, Warning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RecordingFindings(&tc.rec)
			ids := map[string]string{}
			for _, f := range got {
				ids[f.ID] += f.Title + "\n"
			}
			for id, title := range tc.want {
				if !strings.Contains(ids[id], title) {
					t.Errorf("finding %s: %q, want one titled with %q", id, ids[id], title)
				}
			}
			if len(tc.want) == 0 && len(got) != 0 {
				t.Errorf("findings %+v, want none", got)
			}
			if tc.sev != "" && got[0].Severity != tc.sev {
				t.Errorf("the first finding is %s, want %s", got[0].Severity, tc.sev)
			}
		})
	}
}

func TestAddRecordingWeighsOnTheVerdictWhileRecent(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	rec := &flightrec.Recording{Name: "20261126T120000.000Z-stuck-process", Onset: t0,
		Processes: &flightrec.Processes{List: []flightrec.Process{{Pid: 1, Role: "runtime", Comm: "containerd", State: "T"}}}}
	r := &Report{Verdict: Healthy}
	AddRecording(r, rec, t0.Add(10*time.Minute))
	if r.Verdict != Unhealthy || r.Recording != rec.Name || !strings.HasPrefix(r.Findings[0].Title, "recording "+rec.Name) {
		t.Errorf("a recent recording: verdict %s, findings %+v", r.Verdict, r.Findings)
	}
	r = &Report{Verdict: Healthy}
	AddRecording(r, rec, t0.Add(2*time.Hour))
	if r.Verdict != Healthy || r.Findings[0].Severity != Info {
		t.Errorf("an old recording: verdict %s, findings %+v; want it told as info", r.Verdict, r.Findings)
	}
}
