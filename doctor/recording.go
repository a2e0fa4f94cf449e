// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plegkit/pleg/flightrec"
)

// RecentRecording is how old a recording may be and still weigh on the
// verdict of a diagnosis; an older one's findings are told as info.
const RecentRecording = time.Hour

// Thresholds of the findings drawn from a recording.
const (
	// lockWaiters is how many of the runtime's goroutines waiting on one
	// lock make a finding; twice as many a critical one.
	lockWaiters = 5
	// pressureWarning and pressureCritical are the share of time, in
	// percent over the last 10 s, some tasks stalled on a resource.
	pressureWarning  = 20.0
	pressureCritical = 60.0
	// threadsInD is how many threads of a process, itself not in D, make
	// a finding.
	threadsInD = 3
)

// RecordingFindings are the findings a flight recording shows, the worst
// first: the runtime or a shim stopped or in uninterruptible sleep, the
// runtime's goroutines piled on one lock, mounts that do not answer,
// pressure, the kernel's complaints, pleg's calls that hung and the
// probes that did not answer.
func RecordingFindings(rec *flightrec.Recording) []Finding {
	var out []Finding
	out = append(out, processFindings(rec)...)
	if rec.Runtime != nil {
		if f, ok := lockFinding(rec.Runtime); ok {
			out = append(out, f)
		}
	}
	out = append(out, hostFindings(rec)...)
	out = append(out, plegFindings(rec)...)
	out = append(out, partFindings(rec)...)
	slices.SortStableFunc(out, func(x, y Finding) int { return x.Severity.rank() - y.Severity.rank() })
	return out
}

// AddRecording adds to r the findings of rec, named after it, and
// updates the verdict: a recording older than RecentRecording at now
// tells what happened then, not what holds, and weighs as info.
func AddRecording(r *Report, rec *flightrec.Recording, now time.Time) {
	old := now.Sub(rec.Onset) > RecentRecording
	for _, f := range RecordingFindings(rec) {
		f.Title = "recording " + rec.Name + ": " + f.Title
		if old {
			f.Severity = Info
		}
		r.Findings = append(r.Findings, f)
	}
	r.Recording = rec.Name
	slices.SortStableFunc(r.Findings, func(x, y Finding) int { return x.Severity.rank() - y.Severity.rank() })
	r.Verdict = verdictOf(r.Findings)
}

// verdictOf is the verdict the findings make.
func verdictOf(fs []Finding) Verdict {
	v := Healthy
	for _, f := range fs {
		switch f.Severity {
		case Critical:
			return Unhealthy
		case Warning:
			v = AtRisk
		}
	}
	return v
}

func processFindings(rec *flightrec.Recording) []Finding {
	if rec.Processes == nil {
		return nil
	}
	var hung []string
	if rec.Host != nil {
		hung = rec.Host.HungMounts
	}
	var out []Finding
	for _, p := range rec.Processes.List {
		who := fmt.Sprintf("%s %s (pid %d)", p.Role, p.Comm, p.Pid)
		if p.Role == "runtime" {
			who = fmt.Sprintf("the runtime %s itself (pid %d)", p.Comm, p.Pid)
		}
		evidence := []string{fmt.Sprintf("pid %d %s, role %s, state %s, wait channel %q, %.2f s of CPU, %d MiB resident",
			p.Pid, p.Comm, p.Role, p.State, p.WChan, p.CPUSeconds, p.RSSBytes>>20)}
		if s := strings.TrimSpace(p.KernelStack); s != "" {
			evidence = append(evidence, "kernel stack: "+strings.Join(firstLines(s, 6), " | "))
		}
		switch {
		case p.State == "T" || p.State == "t":
			f := Finding{ID: "recording-process-stopped", Severity: Critical, Evidence: evidence,
				Title: fmt.Sprintf("%s is stopped (%s)", who, p.State),
				Action: "a stopped process answers nothing: find what stopped it (SIGSTOP from a person or a tool, a " +
					"debugger attached, ptrace) and resume it with kill -CONT " + fmt.Sprint(p.Pid)}
			if p.Role == "runtime" {
				f.Title = fmt.Sprintf("the runtime %s itself is stopped (%s): pid %d", p.Comm, p.State, p.Pid)
			}
			out = append(out, f)
		case p.State == "D":
			title := fmt.Sprintf("%s is in uninterruptible sleep (D)", who)
			if p.WChan != "" {
				title += " in " + p.WChan
			}
			if len(hung) > 0 {
				title += " while mount " + strings.Join(hung, ", ") + " does not answer"
			}
			sev := Warning
			if p.Role != "child" {
				sev = Critical
			}
			out = append(out, Finding{ID: "recording-process-d-state", Severity: sev, Title: title, Evidence: evidence,
				Action: "a process in D waits in the kernel, most often on storage or a network file system, and no " +
					"signal ends it: look at the mount or device its kernel stack names and at the kernel log"})
		case p.ThreadsD >= threadsInD && p.Role != "child":
			// One thread in D at one instant is a write under way; several
			// are a pile-up. The wait channel is the main thread's, not
			// theirs: left out.
			title := fmt.Sprintf("%d threads of %s were in uninterruptible sleep (D)", p.ThreadsD, who)
			if len(hung) > 0 {
				title += " while mount " + strings.Join(hung, ", ") + " does not answer"
			}
			out = append(out, Finding{ID: "recording-process-d-state", Severity: Warning, Title: title, Evidence: evidence,
				Action: "threads in D wait in the kernel, most often on storage: look at the disk's pressure and the " +
					"kernel log, and at their kernel stacks (/proc/PID/task/TID/stack) while it lasts"})
		case p.State == "Z" && p.Role != "child":
			out = append(out, Finding{ID: "recording-process-zombie", Severity: Warning, Evidence: evidence,
				Title:  fmt.Sprintf("%s is a zombie: it exited and its parent has not reaped it", who),
				Action: "its parent (pid " + fmt.Sprint(p.PPid) + ") is stuck or lost track of it"})
		}
	}
	return out
}

// lockStates are the states a goroutine dump gives a goroutine waiting
// for a lock.
var lockStates = []string{"semacquire", "sync.Mutex.Lock", "sync.RWMutex.Lock", "sync.RWMutex.RLock"}

// lockFinding finds many of the runtime's goroutines waiting for a lock
// taken at one place of its code.
func lockFinding(rt *flightrec.RuntimeState) (Finding, bool) {
	waiters := lockWaitersByFrame(rt.Stacks)
	if len(waiters) == 0 {
		return Finding{}, false
	}
	type frame struct {
		at string
		n  int
	}
	var frames []frame
	total := 0
	for at, n := range waiters {
		frames = append(frames, frame{at, n})
		total += n
	}
	slices.SortFunc(frames, func(a, b frame) int { return cmp.Or(b.n-a.n, strings.Compare(a.at, b.at)) })
	top := frames[0]
	if top.n < lockWaiters {
		return Finding{}, false
	}
	sev := Warning
	if top.n >= 2*lockWaiters {
		sev = Critical
	}
	evidence := []string{fmt.Sprintf("%d goroutines wait for a lock in all, from %s", total, rt.StacksSource)}
	for _, f := range frames[:min(len(frames), 5)] {
		evidence = append(evidence, fmt.Sprintf("%d wait at %s", f.n, f.at))
	}
	return Finding{ID: "recording-lock-contention", Severity: sev, Evidence: evidence,
		Title: fmt.Sprintf("the runtime's goroutines wait on one lock: %d of them at %s", top.n, top.at),
		Action: "the goroutine holding that lock is stuck: look in the stacks for the one inside the same code " +
			"not waiting (often on a shim or the disk), and report it to the runtime's maintainers with the recording"}, true
}

// lockWaitersByFrame counts, in a goroutine dump (debug=2), the
// goroutines waiting for a lock by the first frame of theirs outside
// the sync and runtime packages: where the lock is taken.
func lockWaitersByFrame(stacks string) map[string]int {
	out := map[string]int{}
	for block := range strings.SplitSeq(stacks, "\n\n") {
		head, rest, _ := strings.Cut(strings.TrimSpace(block), "\n")
		if !strings.HasPrefix(head, "goroutine ") {
			continue
		}
		open, end := strings.IndexByte(head, '['), strings.LastIndexByte(head, ']')
		if open < 0 || end < open {
			continue
		}
		state, _, _ := strings.Cut(head[open+1:end], ",")
		if !slices.Contains(lockStates, state) {
			continue
		}
		for line := range strings.SplitSeq(rest, "\n") {
			if strings.HasPrefix(line, "\t") || line == "" {
				continue
			}
			fn := line
			if i := strings.LastIndexByte(fn, '('); i > 0 {
				fn = fn[:i]
			}
			if strings.HasPrefix(fn, "sync.") || strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/sync.") {
				continue
			}
			out[fn]++
			break
		}
	}
	return out
}

func hostFindings(rec *flightrec.Recording) []Finding {
	h := rec.Host
	if h == nil {
		return nil
	}
	var out []Finding
	for _, res := range []string{"io", "memory", "cpu"} {
		p, ok := h.Pressure[res]
		if !ok || p.SomeAvg10 < pressureWarning {
			continue
		}
		sev := Warning
		if p.SomeAvg10 >= pressureCritical {
			sev = Critical
		}
		out = append(out, Finding{ID: "recording-pressure", Severity: sev,
			Title: fmt.Sprintf("%s pressure was %.0f%% at onset", res, p.SomeAvg10),
			Evidence: []string{fmt.Sprintf("/proc/pressure/%s: some avg10=%.2f avg60=%.2f avg300=%.2f, full avg10=%.2f",
				res, p.SomeAvg10, p.SomeAvg60, p.SomeAvg300, p.FullAvg10)},
			Action: pressureAction[res]})
	}
	for _, m := range h.HungMounts {
		out = append(out, Finding{ID: "recording-hung-mount", Severity: Critical,
			Title: fmt.Sprintf("mount %s does not answer a stat", m),
			Evidence: []string{fmt.Sprintf("statfs(%s) had not returned by its deadline; %d mounts checked", m,
				h.MountsChecked)},
			Action: "a mount that does not answer (a network file system whose server is gone, a dying disk) puts " +
				"every process touching it, the runtime's included, in D state: fix or force-unmount it"})
	}
	if len(h.KernelLog) > 0 {
		out = append(out, Finding{ID: "recording-kernel-log", Severity: Warning,
			Title: fmt.Sprintf("the kernel logged %d lines of hung tasks, OOM kills or I/O errors around the onset",
				len(h.KernelLog)),
			Evidence: h.KernelLog[:min(len(h.KernelLog), 8)],
			Action:   "read the whole kernel log around the onset (dmesg -T)"})
	}
	return out
}

var pressureAction = map[string]string{
	"io": "the disk is saturated: the runtime's own writes (its metadata database, the shims' logs) wait; find " +
		"the heavy writers (iotop, /proc/PID/io) and the device (iostat -x)",
	"memory": "the node reclaims memory hard: the runtime stalls in page faults; look at what grew (the pods' " +
		"memory, the page cache) and at swap",
	"cpu": "the node's CPUs are saturated: the runtime waits for CPU; look at the pods' CPU limits and reservations " +
		"for system daemons (--system-reserved)",
}

func plegFindings(rec *flightrec.Recording) []Finding {
	if rec.Pleg == nil || len(rec.Pleg.InFlight) == 0 {
		return nil
	}
	c := rec.Pleg.InFlight[0]
	what := c.Op
	if c.ID != "" {
		what += " of " + c.ID
	}
	ev := make([]string, 0, len(rec.Pleg.InFlight))
	for _, c := range rec.Pleg.InFlight[:min(len(rec.Pleg.InFlight), 8)] {
		ev = append(ev, fmt.Sprintf("%s %s in flight for %.1f s", c.Op, c.ID, c.Seconds))
	}
	return []Finding{{ID: "recording-call-in-flight", Severity: Warning, Operation: c.Op, Evidence: ev,
		Title:  fmt.Sprintf("pleg's CRI call %s had been in flight for %.1f s", what, c.Seconds),
		Action: "the runtime does not answer that call: the processes and stacks of this recording tell where it waits"}}
}

func partFindings(rec *flightrec.Recording) []Finding {
	var out []Finding
	for _, p := range rec.Parts {
		if !p.TimedOut {
			continue
		}
		f := Finding{ID: "recording-probe-timed-out", Severity: Info,
			Title: fmt.Sprintf("the probe %s did not answer within its deadline", p.Name),
			Evidence: []string{fmt.Sprintf("started %s, abandoned %s", p.Started.UTC().Format(time.RFC3339Nano),
				p.Finished.UTC().Format(time.RFC3339Nano))},
			Action: "what it would have read is missing from the recording"}
		switch p.Name {
		case flightrec.PartRuntimeStacks:
			f.Severity = Warning
			f.Title = "the runtime's debug socket did not answer within the probe's deadline: " +
				"the runtime itself is stuck or stopped"
		case flightrec.PartVersion:
			f.Severity = Warning
			f.Title = "the runtime did not answer CRI Version within the probe's deadline"
		}
		out = append(out, f)
	}
	return out
}

func firstLines(s string, n int) []string {
	lines := strings.Split(s, "\n")
	return lines[:min(len(lines), n)]
}
