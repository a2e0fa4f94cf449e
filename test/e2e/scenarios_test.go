// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime"
)

var (
	sleeping = []string{"sleep", "1h"}
	S, D, R  = pleg.ContainerStarted, pleg.ContainerDied, pleg.ContainerRemoved
)

func TestPodWithTwoContainersStarts(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		w := watch(t, in, pleg.Options{})
		pod := newPod("two")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		c1, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		c2, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "sidecar", Args: sleeping})
		must(t, err)

		w.waitEvents(t, pod.UID, sb, S)
		w.waitEvents(t, pod.UID, c1, S)
		w.waitEvents(t, pod.UID, c2, S)

		status, err := w.cache.Get(pod.UID)
		must(t, err)
		if status.Name != "two" || status.Namespace != "e2e" {
			t.Errorf("cached pod %s/%s, want e2e/two", status.Namespace, status.Name)
		}
		if len(status.Sandboxes) != 1 || status.Sandboxes[0].GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("cached sandboxes %v, want one ready", status.Sandboxes)
		}
		for id, name := range map[string]string{c1: "app", c2: "sidecar"} {
			c := status.FindContainerByID(id)
			if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || c.GetMetadata().GetName() != name || c.GetStartedAt() == 0 {
				t.Errorf("cached status of %s = %v, want %s running", id, c, name)
			}
		}
		for _, ev := range w.of(pod.UID) {
			if ev.PodName != "two" || ev.PodNamespace != "e2e" {
				t.Errorf("event %+v misses the pod's name", ev)
			}
			if (ev.ContainerID == sb) != ev.Sandbox {
				t.Errorf("event %+v: Sandbox flag wrong", ev)
			}
		}
	})
}

func TestContainersExitWithTheirCodes(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		w := watch(t, in, pleg.Options{})
		pod := newPod("exits")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		ok, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "ok", Args: []string{"exit", "0", "1s"}})
		must(t, err)
		bad, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "bad", Args: []string{"exit", "1", "1s"}})
		must(t, err)

		// Each runs for a second, so the generator sees it start, then die.
		w.waitEvents(t, pod.UID, ok, S, D)
		w.waitEvents(t, pod.UID, bad, S, D)

		status, err := w.cache.Get(pod.UID)
		must(t, err)
		for _, c := range []struct {
			id     string
			code   int32
			reason string
		}{{ok, 0, "Completed"}, {bad, 1, "Error"}} {
			st := status.FindContainerByID(c.id)
			if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != c.code || st.GetReason() != c.reason || st.GetFinishedAt() == 0 {
				t.Errorf("cached %s: state %v, exit code %d, reason %q; want exited, %d, %q",
					c.id, st.GetState(), st.GetExitCode(), st.GetReason(), c.code, c.reason)
			}
		}
	})
}

func TestCrashedContainerReplacedByANewAttempt(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		w := watch(t, in, pleg.Options{})
		pod := newPod("crash")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		first, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: []string{"crashloop", "2", "1s"}})
		must(t, err)
		w.waitEvents(t, pod.UID, first, S, D)

		// What the kubelet does next: the same container, attempt 1.
		second, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping, Attempt: 1})
		must(t, err)
		w.waitEvents(t, pod.UID, second, S)
		must(t, in.RemoveContainer(ctx(t), first))
		w.waitEvents(t, pod.UID, first, S, D, R)

		status, err := w.cache.Get(pod.UID)
		must(t, err)
		if got := status.FindContainer("app"); got.GetId() != second || got.GetAnnotations()[runtime.ContainerRestartCountAnnotation] != "1" {
			t.Errorf("newest app container in cache = %s (restart count %q), want %s with 1", got.GetId(), got.GetAnnotations()[runtime.ContainerRestartCountAnnotation], second)
		}
	})
}

func TestRemovals(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		w := watch(t, in, pleg.Options{})
		pod := newPod("removals")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		gone, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "gone", Args: sleeping})
		must(t, err)
		stays, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "stays", Args: sleeping})
		must(t, err)
		w.waitEvents(t, pod.UID, gone, S)
		w.waitEvents(t, pod.UID, stays, S)

		// A container stopped, then removed.
		must(t, in.StopContainer(ctx(t), gone, 0))
		w.waitEvents(t, pod.UID, gone, S, D)
		must(t, in.RemoveContainer(ctx(t), gone))
		w.waitEvents(t, pod.UID, gone, S, D, R)

		// The pod stopped and removed: what still ran dies, then everything goes.
		must(t, in.StopPod(ctx(t), sb))
		must(t, in.RemovePod(ctx(t), sb))
		w.waitEvents(t, pod.UID, stays, S, D, R)
		w.waitEvents(t, pod.UID, sb, S, D, R)
		wait(t, "cache entry removed", func() bool {
			_, ok := w.cache.GetEntry(pod.UID)
			return !ok
		})
	})
}

func TestThirtyPodsAtOnce(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		w := watch(t, in, pleg.Options{})
		const n = 30
		pods := make([]runtimetest.PodSpec, n)
		ids := make([][2]string, n) // sandbox, container
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range pods {
			pods[i] = newPod(fmt.Sprintf("many-%02d", i))
			wg.Go(func() {
				sb, err := in.RunPod(ctx(t), pods[i])
				if err != nil {
					errs <- err
					return
				}
				c, err := in.RunContainer(ctx(t), sb, pods[i], runtimetest.ContainerSpec{Name: "app", Args: sleeping})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = [2]string{sb, c}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		wait(t, "a Started for every sandbox and container", func() bool {
			for i, pod := range pods {
				if w.count(pod.UID, ids[i][0], S) == 0 || w.count(pod.UID, ids[i][1], S) == 0 {
					return false
				}
			}
			return true
		})
		// Some more relists: nothing arrives twice.
		time.Sleep(time.Second)
		for i, pod := range pods {
			if evs := w.of(pod.UID); len(evs) != 2 {
				t.Errorf("pod %s: events %v, want one Started each for its sandbox and container", pod.Name, evs)
			}
			for _, id := range ids[i] {
				if n := w.count(pod.UID, id, S); n != 1 {
					t.Errorf("pod %s: %d Started for %s", pod.Name, n, id)
				}
			}
		}
	})
}

// TestRuntimeRestart kills the runtime, keeps it down past the health
// threshold while a container exits, and restarts it: the generator
// reports itself unhealthy only once the threshold is passed, recovers,
// and its cache converges to what the runtime reports, with a Died for the
// container that exited meanwhile and nothing for the one that kept
// running.
//
// What the runtime reports of the container that exited while it was down
// differs (see exitWhileDown): containerd 2.x finds the container's shim
// with no process left, deletes it as leaked (the clean-up of
// containerd#6860) and reports exit code 255, reason "Unknown"; the test
// checks that the generator delivers the final state as the runtime
// reports it. The exit code of a container that ended before the kill
// survives the restart everywhere.
func TestRuntimeRestart(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		const threshold = 3 * time.Second
		w := watch(t, in, pleg.Options{RelistThreshold: threshold})
		pod := newPod("restart")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		long, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "long", Args: sleeping})
		must(t, err)
		before, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "before", Args: []string{"exit", "5", "500ms"}})
		must(t, err)
		during, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "during", Args: []string{"exit", "7", "4s"}})
		must(t, err)
		w.waitEvents(t, pod.UID, before, S, D)
		w.waitEvents(t, pod.UID, during, S)
		w.waitEvents(t, pod.UID, long, S)
		wait(t, "healthy", func() bool { ok, _ := w.gen.Healthy(); return ok })

		must(t, in.Kill())
		// Unhealthy comes only past the threshold, and says so.
		var unhealthy error
		wait(t, "unhealthy while the runtime is down", func() bool {
			ok, err := w.gen.Healthy()
			unhealthy = err
			return !ok
		})
		if msg := unhealthy.Error(); !strings.HasPrefix(msg, "pleg was last seen active ") || !strings.HasSuffix(msg, "; threshold is 3s") {
			t.Errorf("unhealthy with %q", msg)
		}
		// The container exits 4 s after it started, while the runtime is down.
		time.Sleep(2 * time.Second)
		must(t, in.Restart(ctx(t)))

		wait(t, "healthy again", func() bool { ok, _ := w.gen.Healthy(); return ok })
		w.waitEvents(t, pod.UID, during, S, D)
		wait(t, "the cache agrees with the runtime", func() bool {
			status, err := w.cache.Get(pod.UID)
			if err != nil {
				return false
			}
			for _, id := range []string{long, before, during} {
				truth, err := in.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
				cached := status.FindContainerByID(id)
				if err != nil || cached.GetState() != truth.GetStatus().GetState() || cached.GetExitCode() != truth.GetStatus().GetExitCode() {
					return false
				}
			}
			return true
		})
		status, err := w.cache.Get(pod.UID)
		must(t, err)
		if st := status.FindContainerByID(before); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 5 {
			t.Errorf("container that exited before the kill: %v, exit code %d; want exited, 5", st.GetState(), st.GetExitCode())
		}
		if st := status.FindContainerByID(during); st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("container that exited while the runtime was down: %v, want exited", st.GetState())
		} else if code, reason := exitWhileDown(in.Spec); st.GetExitCode() != code || st.GetReason() != reason {
			t.Errorf("%s reports the container that exited while it was down with exit code %d, reason %q; want %d, %q",
				in.Spec, st.GetExitCode(), st.GetReason(), code, reason)
		}
		if st := status.FindContainerByID(long); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("the long container is %v after the restart, want running", st.GetState())
		}
		for id, want := range map[string][]pleg.EventType{long: {S}, before: {S, D}, during: {S, D}, sb: {S}} {
			if got := w.types(pod.UID, id); !slices.Equal(got, want) {
				t.Errorf("events for %s across the restart: %v, want %v", id, got, want)
			}
		}
	})
}

// exitWhileDown is the exit code and reason a runtime reports for a
// container that exited with code 7 while the runtime was down: CRI-O
// reads it from the exit file conmon wrote meanwhile; containerd, 1.7 as
// 2.x, finds the container's shim without its process and reports 255,
// "Unknown".
func exitWhileDown(spec runtimetest.Spec) (int32, string) {
	if spec.Kind == runtimetest.CRIO {
		return 7, "Error"
	}
	return 255, "Unknown"
}
