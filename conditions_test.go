// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func TestWatchConditions(t *testing.T) {
	always := func(*runtime.PodStatus) bool { return true }
	never := func(*runtime.PodStatus) bool { return false }
	running := fakeruntime.New(pod("running", ctr("c1", runtimeapi.ContainerState_CONTAINER_RUNNING)))

	for _, tc := range []struct {
		name string
		pod  string
		// set installs the conditions; it gets the generator so that a
		// condition can replace itself while being evaluated.
		set           func(g *Generator)
		wantEvaluated bool
		wantMet       bool
		wantLeft      int
	}{
		{name: "no conditions", pod: "running", set: func(*Generator) {}},
		{
			name: "completing, never and self-updating", pod: "running",
			set: func(g *Generator) {
				g.SetPodWatchCondition("running", "completing", always)
				g.SetPodWatchCondition("running", "watching", never)
				g.SetPodWatchCondition("running", "updating", func(*runtime.PodStatus) bool {
					// Replaced while being evaluated: the replacement survives.
					g.SetPodWatchCondition("running", "updating", never)
					return true
				})
			},
			wantEvaluated: true, wantMet: true, wantLeft: 2,
		},
		{
			name: "replaced before the relist", pod: "running",
			set: func(g *Generator) {
				g.SetPodWatchCondition("running", "c", never)
				g.SetPodWatchCondition("running", "c", always)
			},
			wantEvaluated: true, wantMet: true, wantLeft: 0,
		},
		{
			name: "never met", pod: "running",
			set: func(g *Generator) {
				g.SetPodWatchCondition("running", "c", never)
			},
			wantEvaluated: true, wantLeft: 1,
		},
		{
			name: "pod not listed", pod: "absent",
			set: func(g *Generator) {
				g.SetPodWatchCondition("absent", "c", always)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, running)
			e.relist()
			tc.set(e.g)
			running.ResetCalls()
			events := e.relist()

			if got := running.ItemCalls("c1") > 0; got != tc.wantEvaluated {
				t.Errorf("pod inspected = %v, want %v", got, tc.wantEvaluated)
			}
			var want []ev
			if tc.wantMet {
				want = append(want, ev{tc.pod, ConditionMet, ""})
			}
			assertEvents(t, events, want...)
			if got := e.g.conditions.count(tc.pod); got != tc.wantLeft {
				t.Errorf("%d conditions left, want %d", got, tc.wantLeft)
			}
		})
	}
}

func TestWatchConditionsOfVanishedPodDropped(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("p1", ctr("c1", running))))
	e.relist()
	e.g.SetPodWatchCondition("p1", "c", func(*runtime.PodStatus) bool { return false })
	e.rt.SetPods()
	assertEvents(t, e.relist(), diedEv("p1", "c1"), removedEv("p1", "c1"))
	if n := e.g.conditions.count("p1"); n != 0 {
		t.Errorf("%d conditions left for a vanished pod", n)
	}
}

func TestWatchConditionWithContainerEvents(t *testing.T) {
	e := newEnv(t, fakeruntime.New(pod("p1", ctr("c1", running))))
	e.relist()
	e.g.SetPodWatchCondition("p1", "c", func(s *runtime.PodStatus) bool {
		return s.FindContainerByID("c1").GetState() == exited
	})
	assertEvents(t, e.relist())
	e.rt.SetPods(pod("p1", ctr("c1", exited)))
	assertEvents(t, e.relist(), ev{"p1", ConditionMet, ""}, diedEv("p1", "c1"))
	// Met once, then gone: no more inspections.
	e.rt.ResetCalls()
	assertEvents(t, e.relist())
	if e.rt.ItemCalls("c1") != 0 {
		t.Error("pod inspected after its condition was met")
	}
}

func TestRunningContainerWatchCondition(t *testing.T) {
	status := &runtime.PodStatus{Containers: []*runtimeapi.ContainerStatus{
		{Id: "1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: running, Image: &runtimeapi.ImageSpec{Image: "v1"}},
		{Id: "2", Metadata: &runtimeapi.ContainerMetadata{Name: "done"}, State: exited},
	}}
	hasImage := func(img string) func(*runtimeapi.ContainerStatus) bool {
		return func(c *runtimeapi.ContainerStatus) bool { return c.GetImage().GetImage() == img }
	}
	for _, tc := range []struct {
		name      string
		container string
		image     string
		want      bool
	}{
		{"running and holds", "app", "v1", true},
		{"running and does not hold", "app", "v2", false},
		{"not running: nothing to wait for", "done", "v2", true},
		{"missing: nothing to wait for", "gone", "v2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RunningContainerWatchCondition(tc.container, hasImage(tc.image))(status); got != tc.want {
				t.Errorf("condition = %v, want %v", got, tc.want)
			}
		})
	}
}
