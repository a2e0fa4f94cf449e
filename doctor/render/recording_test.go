// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/flightrec"
)

// goldenRecording is a recording of a shim stopped while io pressure is
// high, the debug socket cut at its deadline; a name from the runtime
// carries a terminal escape.
func goldenRecording() *flightrec.Recording {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	parts := []flightrec.Part{
		{Name: flightrec.PartPleg, Started: at(1000), Finished: at(1001)},
		{Name: flightrec.PartVersion, Started: at(1000), Finished: at(1012)},
		{Name: flightrec.PartProcesses, Started: at(1000), Finished: at(1030)},
		{Name: flightrec.PartRuntimeStacks, Started: at(1000), Finished: at(6000), TimedOut: true},
		{Name: flightrec.PartHost, Started: at(1000), Finished: at(1002)},
		{Name: flightrec.PartMounts, Started: at(1000), Finished: at(3500)},
		{Name: flightrec.PartKernelLog, Started: at(1000), Finished: at(1000), Skipped: "not opted in"},
		{Name: flightrec.PartKubelet, Started: at(1000), Finished: at(1000), Skipped: "no way to read the kubelet's metrics was given"},
	}
	rec := &flightrec.Recording{
		Version: flightrec.FormatVersion, Name: "20261126T120000.000Z-stuck-process", Trigger: flightrec.TriggerStuckProcess,
		Reason: "the shim containerd-shim (pid 200) is in state T", Onset: t0, Started: at(1000), Finished: at(6001),
		Timeline: []flightrec.TimelineEntry{
			{At: t0, Kind: "trigger", What: flightrec.TriggerStuckProcess, Detail: "the shim containerd-shim (pid 200) is in state T"},
			{At: at(900), Kind: "trigger", What: flightrec.TriggerSlowCall, Detail: "the CRI call podsandbox_status sb1 has been in flight for 1m0s, past 1m0s"},
		},
		Parts: parts,
		Pleg: &flightrec.PlegView{
			InFlight: []flightrec.Call{{Op: "podsandbox_status", ID: "sb1", Start: at(-59000), Seconds: 60}},
			Status:   &flightrec.GeneratorStatus{Mode: "auto", Healthy: true, RelistThreshold: 180},
			Stream:   flightrec.StreamView{Open: true, Events: 12, LastEventAt: at(-120000)},
		},
		Runtime: &flightrec.RuntimeState{Endpoint: "unix:///run/containerd/containerd.sock", Name: "containerd",
			Version: "v2.4.2", Pid: 100, UptimeSeconds: 3600},
		Processes: &flightrec.Processes{FoundBy: "socket", HostView: true, WindowSeconds: 1, List: []flightrec.Process{
			{Pid: 100, PPid: 1, Role: "runtime", Comm: "containerd", State: "S", WChan: "futex_wait_queue", CPUSeconds: 12.5,
				RSSBytes: 80 << 20, AgeSeconds: 3600, Sched: &flightrec.Sched{WindowSeconds: 1, RanSeconds: 0.01, WaitedSeconds: 0.002, Threads: 30},
				Cgroup: &flightrec.Cgroup{CPUPath: "/system.slice/containerd.service", CPUPeriods: 10, PidsPath: "/system.slice/containerd.service", PidsCurrent: 90}},
			{Pid: 200, PPid: 1, Role: "shim", Comm: "containerd-shim", State: "T", Held: true, WChan: "do_signal_stop", CPUSeconds: 0.25,
				RSSBytes: 12 << 20, AgeSeconds: 1800, ID: "4e1d0f5a2b3c4d5e6f70", Children: 1},
			{Pid: 201, PPid: 200, Role: "child", Comm: "evil\x1b[2J", State: "D", Held: true, WChan: "request_wait_answer", RSSBytes: 1 << 20, AgeSeconds: 1800},
		}},
		Host: &flightrec.Host{
			Pressure:      map[string]flightrec.Pressure{"io": {SomeAvg10: 82.25, SomeAvg60: 40, FullAvg10: 60}, "cpu": {SomeAvg10: 1.5}},
			Load:          [3]float64{3.5, 2.25, 1},
			Memory:        map[string]int64{"MemTotal": 16 << 30, "MemAvailable": 2 << 30, "SwapTotal": 0, "SwapFree": 0},
			MountsChecked: 31,
			PIDs:          &flightrec.PIDs{Max: 32768, ThreadsMax: 192730, InUse: 700},
		},
	}
	for _, p := range parts {
		rec.Timeline = append(rec.Timeline,
			flightrec.TimelineEntry{At: p.Started, Kind: "part-start", What: p.Name},
			flightrec.TimelineEntry{At: p.Finished, Kind: "part-end", What: p.Name, Detail: partWord(p)})
	}
	return rec
}

func TestGoldenRecording(t *testing.T) {
	v := NewRecordingView(goldenRecording())
	var text, js, page bytes.Buffer
	if err := RecordingText(&text, v); err != nil {
		t.Fatal(err)
	}
	if err := RecordingJSON(&js, v); err != nil {
		t.Fatal(err)
	}
	if err := RecordingHTML(&page, v); err != nil {
		t.Fatal(err)
	}
	golden(t, "recording.txt", text.Bytes())
	golden(t, "recording.json", js.Bytes())
	golden(t, "recording.html", page.Bytes())
	for name, out := range map[string]string{"text": text.String(), "json": js.String()} {
		if strings.Contains(out, "\x1b") {
			t.Errorf("the %s output holds a raw escape from a process name", name)
		}
	}
	for _, want := range []string{"<svg", "trigger stuck-process", `class="timedout"`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestRecordingList(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	if err := RecordingList(&out, []flightrec.Entry{{Name: "20261126T120000.000Z-unhealthy", Trigger: "unhealthy", Time: t0, Bytes: 5000}}); err != nil {
		t.Fatal(err)
	}
	golden(t, "recordings.txt", out.Bytes())
}
