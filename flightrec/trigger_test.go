// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"testing"
	"time"
)

func TestTriggers(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	healthy := func(d time.Duration) observation {
		return observation{now: at(d), threshold: 3 * time.Minute, healthy: true}
	}
	slowCall := func(d, age time.Duration) observation {
		o := healthy(d)
		o.oldest = &Call{Op: "podsandbox_status", ID: "sb1", Start: at(d - age)}
		return o
	}
	slowRelist := func(d, age time.Duration) observation {
		o := healthy(d)
		o.relistInFlightSince = at(d - age)
		return o
	}
	unhealthy := func(d time.Duration) observation {
		o := healthy(d)
		o.healthy, o.healthErr = false, "pleg was last seen active 3m1s ago"
		return o
	}
	silent := func(d, since time.Duration) observation {
		o := healthy(d)
		o.unexplained = at(d - since)
		return o
	}
	condition := func(d time.Duration) observation {
		o := healthy(d)
		o.conditionOn = true
		return o
	}
	stuck := func(d time.Duration) observation {
		o := healthy(d)
		o.stuck = []Process{{Pid: 42, Comm: "containerd-shim", Role: "shim", State: "T"}}
		return o
	}
	type step struct {
		o    observation
		want string // the trigger recorded, "" for none
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a call past a third of the threshold records once", []step{
			{slowCall(0, 59*time.Second), ""},
			{slowCall(time.Second, 60*time.Second), TriggerSlowCall},
			{slowCall(2*time.Second, 61*time.Second), ""},
			{unhealthy(3 * time.Minute), ""}, // the same incident
		}},
		{"a relist past a third of the threshold", []step{
			{slowRelist(0, time.Minute), TriggerSlowRelist},
		}},
		{"an unhealthy check", []step{{unhealthy(0), TriggerUnhealthy}}},
		{"the stream silent past its grace", []step{
			{silent(0, 9*time.Second), ""},
			{silent(time.Second, 10*time.Second), TriggerStreamSilent},
		}},
		{"the node condition", []step{{condition(0), TriggerCondition}}},
		{"a stuck process", []step{{stuck(0), TriggerStuckProcess}}},
		{"a second incident past the floor records again", []step{
			{unhealthy(0), TriggerUnhealthy},
			{healthy(time.Minute), ""},
			{unhealthy(6 * time.Minute), TriggerUnhealthy},
		}},
		{"a second incident within the floor waits for it", []step{
			{unhealthy(0), TriggerUnhealthy},
			{healthy(time.Minute), ""},
			{unhealthy(2 * time.Minute), ""},
			{unhealthy(4 * time.Minute), ""},
			{unhealthy(5 * time.Minute), TriggerUnhealthy},
			{unhealthy(11 * time.Minute), ""},
		}},
		{"an incident lasts while a trigger holds, healthy or not", []step{
			{slowCall(0, time.Minute), TriggerSlowCall},
			{slowCall(10*time.Minute, 11*time.Minute), ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := triggerState{fraction: DefaultFraction, silentGrace: DefaultSilentGrace, floor: 5 * time.Minute}
			for i, st := range tc.steps {
				ok, f := s.step(st.o)
				got := ""
				if ok {
					got = f.kind
				}
				if got != st.want {
					t.Errorf("step %d at %v: recorded %q, want %q", i, st.o.now.Sub(t0), got, st.want)
				}
			}
		})
	}
}

func TestTimelineTellsEachTriggerOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s := triggerState{fraction: DefaultFraction, silentGrace: DefaultSilentGrace, floor: 5 * time.Minute}
	o := observation{now: t0, threshold: 3 * time.Minute, healthy: true,
		oldest: &Call{Op: "list_containers", Start: t0.Add(-time.Minute)}}
	s.step(o)
	o.now = t0.Add(time.Second)
	s.step(o)
	o.now, o.healthy, o.healthErr = t0.Add(2*time.Minute), false, "not healthy"
	s.step(o)
	if len(s.timeline) != 2 || s.timeline[0].What != TriggerSlowCall || s.timeline[1].What != TriggerUnhealthy ||
		!s.timeline[1].At.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("timeline %+v, want the slow call at the onset, then the failing check", s.timeline)
	}
}
