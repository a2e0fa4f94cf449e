// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// observation is what one look at pleg and the node showed.
type observation struct {
	now time.Time
	// threshold is the health threshold the fraction applies to.
	threshold time.Duration
	healthy   bool
	healthErr string
	// relistInFlightSince is the start of the global relist running.
	relistInFlightSince time.Time
	// oldest is pleg's oldest CRI call in flight, if any.
	oldest *Call
	// unexplained is since when the lists show a change the connected
	// stream did not tell.
	unexplained time.Time
	// conditionOn tells the node condition pleg writes is on.
	conditionOn bool
	// stuck are the runtime's processes, or its shims', stopped or in D
	// on consecutive looks.
	stuck []Process
}

// firing is one trigger that holds.
type firing struct{ kind, reason string }

// triggerState decides when to record: at most once an incident, which
// lasts from the first trigger until no trigger holds and health is good,
// and never twice within the floor.
type triggerState struct {
	fraction     float64
	silentGrace  time.Duration
	floor        time.Duration
	inIncident   bool
	recorded     bool
	lastRecorded time.Time
	// seen are the triggers that fired in the incident, and timeline
	// when.
	seen     []string
	timeline []TimelineEntry
}

// active lists the triggers o shows.
func (s *triggerState) active(o observation) []firing {
	var out []firing
	limit := time.Duration(float64(o.threshold) * s.fraction)
	if !o.relistInFlightSince.IsZero() && o.now.Sub(o.relistInFlightSince) >= limit {
		out = append(out, firing{TriggerSlowRelist, fmt.Sprintf("the relist has been in flight for %v, past %v (%.2g of the "+
			"health threshold %v)", o.now.Sub(o.relistInFlightSince).Round(time.Millisecond), limit, s.fraction, o.threshold)})
	}
	if o.oldest != nil && o.now.Sub(o.oldest.Start) >= limit {
		what := o.oldest.Op
		if o.oldest.ID != "" {
			what += " " + o.oldest.ID
		}
		out = append(out, firing{TriggerSlowCall, fmt.Sprintf("the CRI call %s has been in flight for %v, past %v",
			what, o.now.Sub(o.oldest.Start).Round(time.Millisecond), limit)})
	}
	if !o.healthy {
		out = append(out, firing{TriggerUnhealthy, "the health check fails: " + o.healthErr})
	}
	if !o.unexplained.IsZero() && o.now.Sub(o.unexplained) >= s.silentGrace {
		out = append(out, firing{TriggerStreamSilent, fmt.Sprintf("the lists have shown containers change since %s and "+
			"the connected event stream told nothing", o.unexplained.UTC().Format(time.RFC3339))})
	}
	if o.conditionOn {
		out = append(out, firing{TriggerCondition, "the node condition pleg writes turned on"})
	}
	if len(o.stuck) > 0 { // one is enough to tell
		p := o.stuck[0]
		reason := fmt.Sprintf("the %s %s (pid %d) is in state %s", p.Role, p.Comm, p.Pid, p.State)
		if p.Role == RoleOCI || p.Role == RoleCNI {
			reason = fmt.Sprintf("the %s %s (pid %d) has run %s for %.0f s", map[string]string{RoleOCI: "OCI runtime",
				RoleCNI: "CNI plugin"}[p.Role], p.Comm, p.Pid, cmp.Or(p.CNICommand, p.Subcommand, "a command"), p.AgeSeconds)
		}
		out = append(out, firing{TriggerStuckProcess, reason})
	}
	return out
}

// step takes one observation and tells whether to record now, and on
// which trigger.
func (s *triggerState) step(o observation) (record bool, trigger firing) {
	act := s.active(o)
	if len(act) == 0 {
		if o.healthy && s.inIncident {
			s.inIncident, s.recorded, s.seen, s.timeline = false, false, nil, nil
		}
		return false, firing{}
	}
	if !s.inIncident {
		s.inIncident = true
	}
	for _, f := range act {
		if !slices.Contains(s.seen, f.kind) {
			s.seen = append(s.seen, f.kind)
			s.timeline = append(s.timeline, TimelineEntry{At: o.now, Kind: "trigger", What: f.kind, Detail: f.reason})
		}
	}
	if s.recorded || (!s.lastRecorded.IsZero() && o.now.Sub(s.lastRecorded) < s.floor) {
		return false, firing{}
	}
	s.recorded, s.lastRecorded = true, o.now
	return true, act[0]
}
