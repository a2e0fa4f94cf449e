// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// details is what an event says of its container, as comparable text:
// absent fields are left out, and a nil exit code differs from 0.
func details(e Event) string {
	parts := []string{fmt.Sprintf("%s(%s)", e.Type, e.ContainerID)}
	if e.Image != "" {
		parts = append(parts, "image="+e.Image)
	}
	if e.Attempt != nil {
		parts = append(parts, fmt.Sprintf("attempt=%d", *e.Attempt))
	}
	if e.ExitCode != nil {
		parts = append(parts, fmt.Sprintf("exit=%d", *e.ExitCode))
	}
	if e.Reason != "" {
		parts = append(parts, "reason="+e.Reason)
	}
	if e.Message != "" {
		parts = append(parts, "message="+e.Message)
	}
	if !e.FinishedAt.IsZero() {
		parts = append(parts, "finished="+e.FinishedAt.UTC().Format(time.RFC3339Nano))
	}
	return strings.Join(parts, " ")
}

func allDetails(events []Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, details(e))
	}
	return out
}

// createdAt is when the scripted app container was created; the fake
// runtime says it started 1 ns and finished 2 ns later.
var createdAt = testStart.Add(-time.Hour)

var finished = "finished=" + createdAt.Add(2).Format(time.RFC3339Nano)

// app scripts the container c1 of image app:2 at its fourth restart.
func app(state runtimeapi.ContainerState, exit int32, reason, message string) fakeruntime.Container {
	return fakeruntime.Container{
		ID: "c1", Name: "app", State: state, Image: "registry.example/app:2", Attempt: 4,
		CreatedAt: createdAt.UnixNano(), ExitCode: exit, Reason: reason, Message: message,
	}
}

// appPod is a pod whose sandbox sb is in sandbox, with containers.
func appPod(sandbox runtimeapi.PodSandboxState, containers ...fakeruntime.Container) fakeruntime.Pod {
	return fakeruntime.Pod{UID: "web", Name: "web", Namespace: "shop",
		Sandboxes: []fakeruntime.Sandbox{{ID: "sb", State: sandbox}}, Containers: containers}
}

// The deaths a relist finds say why, from the status it inspected; what
// the runtime did not report is left out, never made up.
func TestDiedSaysWhy(t *testing.T) {
	const started = "ContainerStarted(c1) image=registry.example/app:2 attempt=4"
	for _, tc := range []struct {
		name string
		then fakeruntime.Pod
		want []string
	}{{
		name: "exit 3",
		then: appPod(ready, app(exited, 3, "", "")),
		want: []string{"ContainerDied(c1) image=registry.example/app:2 attempt=4 exit=3 reason=Error " + finished},
	}, {
		name: "exit 0",
		then: appPod(ready, app(exited, 0, "", "")),
		want: []string{"ContainerDied(c1) image=registry.example/app:2 attempt=4 exit=0 reason=Completed " + finished},
	}, {
		name: "OOM killed",
		then: appPod(ready, app(exited, 137, "OOMKilled", "out of memory")),
		want: []string{"ContainerDied(c1) image=registry.example/app:2 attempt=4 exit=137 reason=OOMKilled " +
			"message=out of memory " + finished},
	}, {
		// No status, no exit; its image is still known from its start.
		name: "vanished unseen exited",
		then: appPod(ready),
		want: []string{
			"ContainerDied(c1) image=registry.example/app:2 attempt=4",
			"ContainerRemoved(c1) image=registry.example/app:2 attempt=4",
		},
	}, {
		// A sandbox has no exit code, image or attempt.
		name: "sandbox stopped",
		then: appPod(notReady, app(running, 0, "", "")),
		want: []string{"ContainerDied(sb)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fakeruntime.New(appPod(ready, app(running, 0, "", ""))))
			if got := allDetails(e.relist()); !slices.Contains(got, started) || !slices.Contains(got, "ContainerStarted(sb)") {
				t.Fatalf("first relist: %q, want %q and a bare sandbox start", got, started)
			}
			e.rt.SetPods(tc.then)
			if got := allDetails(e.relist()); !slices.Equal(got, tc.want) {
				t.Errorf("events:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

// A removal after an exit names the image it ran, though the runtime no
// longer has its status, and repeats no exit: that was the Died's news.
// The record keeps the image across relists that changed other items.
func TestRemovedNamesTheImage(t *testing.T) {
	other := fakeruntime.Container{ID: "c2", Name: "side", State: running, CreatedAt: createdAt.UnixNano()}
	e := newEnv(t, fakeruntime.New(appPod(ready, app(running, 0, "", ""), other)))
	e.relist()
	other.State = exited
	e.rt.SetPods(appPod(ready, app(running, 0, "", ""), other))
	e.relist() // c1 unchanged, listed anew
	e.rt.SetPods(appPod(ready, app(exited, 1, "", ""), other))
	e.relist()
	e.rt.SetPods(appPod(ready, other))
	want := []string{"ContainerRemoved(c1) image=registry.example/app:2 attempt=4"}
	if got := allDetails(e.relist()); !slices.Equal(got, want) {
		t.Errorf("events:\n got  %q\n want %q", got, want)
	}
}

// An event's payload tells the same as the relist does: the exit of the
// status it carries, on the Died it delivers before any relist.
func TestPayloadDiedSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		exit fakeruntime.Container
		want string
	}{{
		name: "exit 3",
		exit: app(exited, 3, "", ""),
		want: "ContainerDied(c1) image=registry.example/app:2 attempt=4 exit=3 reason=Error " + finished,
	}, {
		name: "OOM killed",
		exit: app(exited, 137, "OOMKilled", ""),
		want: "ContainerDied(c1) image=registry.example/app:2 attempt=4 exit=137 reason=OOMKilled " + finished,
	}} {
		for _, path := range eventPaths {
			t.Run(tc.name+"/"+path.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newEventedEnvWith(t, path.opt, appPod(ready, app(running, 0, "", "")))
					e.settle()
					e.rt.SetPods(appPod(ready, tc.exit))
					e.rt.Emit("web", "c1", evStopped, time.Time{})
					synctest.Wait()
					if path.name == "hints" {
						// Hints wait for the pod's relist.
						time.Sleep(2 * time.Second)
						synctest.Wait()
					}
					var got []string
					for {
						x, ok := e.sub.TryNext()
						if !ok {
							break
						}
						got = append(got, details(x))
					}
					if want := []string{tc.want}; !slices.Equal(got, want) {
						t.Errorf("events:\n got  %q\n want %q", got, want)
					}
				})
			})
		}
	}
	// A sandbox's death carries no exit, whichever path tells it.
	for _, path := range eventPaths {
		t.Run("sandbox/"+path.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEventedEnvWith(t, path.opt, appPod(ready))
				e.settle()
				_ = e.rt.SetSandboxState("sb", notReady)
				e.rt.Emit("web", "sb", evStopped, time.Time{})
				time.Sleep(2 * time.Second)
				synctest.Wait()
				var got []string
				for {
					x, ok := e.sub.TryNext()
					if !ok {
						break
					}
					got = append(got, details(x))
				}
				if want := []string{"ContainerDied(sb)"}; !slices.Equal(got, want) {
					t.Errorf("events:\n got  %q\n want %q", got, want)
				}
			})
		})
	}
}

// A death found after a restart says why as a live one does, and a
// container that ran and exited while no generator watched is told
// started, without an exit, then died, with it.
func TestDiedAfterRestartSaysWhy(t *testing.T) {
	store := &MemoryStore{}
	rt := fakeruntime.New(appPod(ready, app(running, 0, "", "")))
	newEnv(t, rt, withStore(store)).relist()

	flash := app(exited, 0, "", "")
	flash.ID, flash.Attempt = "c2", 0
	rt.SetPods(appPod(ready, app(exited, 3, "", ""), flash))
	got := newEnv(t, rt, withStore(store)).relist()
	want := []string{
		"ContainerDied(c1) image=registry.example/app:2 attempt=4 exit=3 reason=Error " + finished,
		"ContainerStarted(c2) image=registry.example/app:2 attempt=0",
		"ContainerDied(c2) image=registry.example/app:2 attempt=0 exit=0 reason=Completed " + finished,
	}
	if d := allDetails(got); !slices.Equal(d, want) {
		t.Errorf("events:\n got  %q\n want %q", d, want)
	}
	for _, e := range got {
		if !e.AfterRestart {
			t.Errorf("%s: not marked afterRestart", details(e))
		}
	}
}

// A subscriber whose pending events fold (here a's ended life, the oldest
// of more than maxEndedPending, folds to one transition from running to
// gone) still gets the exit on the Died it is told.
func TestFoldedDiedKeepsItsExit(t *testing.T) {
	f := newTestFanout(t)
	sub := f.subscribe()
	step := func(id, s string, d *detail) {
		c := change("p", "a:"+s)
		c.transitions[0].id, c.transitions[0].detail = id, d
		f.publish(c, c.events())
	}
	start := &detail{image: "app:2", attempt: 4}
	exit := &detail{image: "app:2", attempt: 4, exited: true, exitCode: 3, reason: "Error"}
	step("a", "none>run", start)
	readAll(sub)
	step("a", "run>exit", exit)
	step("a", "exit>none", exit) // a removal carries the detail last inspected
	for i := range maxEndedPending {
		id := fmt.Sprintf("c%02d", i)
		for _, s := range []string{"none>run", "run>exit", "exit>none"} {
			step(id, s, nil)
		}
	}
	var got []string
	for {
		e, ok := sub.TryNext()
		if !ok {
			break
		}
		if e.ContainerID == "a" {
			got = append(got, details(e))
		}
	}
	want := []string{"ContainerDied(a) image=app:2 attempt=4 exit=3 reason=Error", "ContainerRemoved(a) image=app:2 attempt=4"}
	if !slices.Equal(got, want) {
		t.Errorf("events of a:\n got  %q\n want %q", got, want)
	}
}
