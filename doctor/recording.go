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

// RecordingFindings are the findings a flight recording shows, the
// cause first: the same code judges a recording and pleg doctor's live
// view of the node (nodeFindings), so a cause is named the same way
// whether it was kept at the onset or seen now.
func RecordingFindings(rec *flightrec.Recording) []Finding {
	return nodeFindings(recordingView(rec))
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
	rankFindings(r.Findings)
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

// lockStates are the states a goroutine dump gives a goroutine waiting
// for a lock.
var lockStates = []string{"semacquire", "sync.Mutex.Lock", "sync.RWMutex.Lock", "sync.RWMutex.RLock"}

// lockFinding finds many of the runtime's goroutines waiting for a lock
// taken at one place of its code.
func lockFinding(rt *flightrec.RuntimeState, kind runtimeKind) (Finding, bool) {
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
	return Finding{ID: "runtime-lock-contention", Severity: sev, Evidence: evidence,
		Title: fmt.Sprintf("The runtime's goroutines wait on one lock: %d of them at %s", top.n, top.at),
		Action: fmt.Sprintf("The goroutine holding that lock is stuck: look in the stacks for the one inside the same "+
			"code not waiting (often on a shim or the disk), and report it to %s's maintainers with the recording "+
			"(%s).", kind.name, kind.journal)}, true
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
	return []Finding{{ID: "call-in-flight", Severity: Warning, Operation: c.Op, Evidence: ev,
		Title:  fmt.Sprintf("pleg's CRI call %s had been in flight for %.1f s", what, c.Seconds),
		Action: "The runtime does not answer that call: the processes and stacks of this recording tell where it waits."}}
}

func partFindings(rec *flightrec.Recording, kind runtimeKind) []Finding {
	var out []Finding
	for _, p := range rec.Parts {
		if !p.TimedOut {
			continue
		}
		f := Finding{ID: "probe-timed-out", Severity: Info,
			Title: fmt.Sprintf("The probe %s did not answer within its deadline", p.Name),
			Evidence: []string{fmt.Sprintf("started %s, abandoned %s", p.Started.UTC().Format(time.RFC3339Nano),
				p.Finished.UTC().Format(time.RFC3339Nano))},
			Action: "What it would have read is missing."}
		switch p.Name {
		case flightrec.PartRuntimeStacks:
			f.Severity = Warning
			f.Title = "The runtime's debug socket did not answer within the probe's deadline: " +
				"the runtime itself is stuck or stopped"
			f.Action = "Take its stacks by hand: " + kind.stacks(0) + "."
		case flightrec.PartVersion:
			f.Severity = Warning
			f.Title = "The runtime did not answer CRI Version within the probe's deadline"
		case flightrec.PartKubelet:
			f.Title = "The kubelet's metrics did not answer within the probe's deadline"
		}
		out = append(out, f)
	}
	return out
}
