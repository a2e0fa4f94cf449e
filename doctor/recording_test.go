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

// Many of the runtime's goroutines waiting on one lock tell where the
// runtime is stuck; a few are its normal traffic.
func TestLockContention(t *testing.T) {
	for _, tc := range []struct {
		waiters int
		want    Severity
	}{{3, ""}, {6, Warning}, {12, Critical}} {
		rec := &flightrec.Recording{Runtime: &flightrec.RuntimeState{Name: "containerd", Stacks: stacks(tc.waiters),
			StacksSource: "debug"}}
		got := RecordingFindings(rec)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%d waiters: %+v, want nothing", tc.waiters, got)
		case tc.want != "" && (len(got) != 1 || got[0].ID != "runtime-lock-contention" || got[0].Severity != tc.want ||
			!strings.Contains(got[0].Title, fmt.Sprintf("%d of them at github.com/containerd/containerd/v2/internal/cri/store/container.(*Store).Get", tc.waiters))):
			t.Errorf("%d waiters: %+v, want one %s", tc.waiters, got, tc.want)
		}
	}
}
