// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"cmp"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// WorkloadImage is the image of the simulated workload's containers.
const WorkloadImage = "registry.k8s.io/e2e-test-images/agnhost:2.53"

// PauseImage is the sandbox image the simulator reports.
const PauseImage = "registry.k8s.io/pause:3.10.2"

// Exit codes a crash picks from: application errors and deaths by signal.
func crashCode(r *rand.Rand) int32 {
	exitCodes := [...]int32{1, 1, 1, 2, 127, 134, 137, 139, 255}
	return exitCodes[r.IntN(len(exitCodes))]
}

type actionKind uint8

const (
	actRestart     actionKind = iota // create and start a crashed container's next attempt
	actShortExit                     // a short-lived container exits
	actShortRemove                   // a short-lived container is removed
	actReplacePod                    // remove a stopped pod and create its replacement
)

// action is a change scheduled for a later tick.
type action struct {
	due  uint64
	kind actionKind
	sb   *sandbox
	c    *container
}

// workload makes the churn. Its random choices come from one generator
// seeded by Options.Seed and are made over creation order, never map
// order, so a seed and a number of ticks give one history.
type workload struct {
	mu         sync.Mutex // serializes ticks
	churn      Churn
	containers int
	exited     int
	gc         bool
	imageRef   string // the ID of WorkloadImage, which its containers run
	rng        *rand.Rand
	pending    []action
	podN       uint64
	shortN     uint64
	gcPods     []*sandbox // pods with exits since the last collection
	gcMarked   map[*sandbox]bool
}

func newWorkload(opts Options, imageRef string) *workload {
	return &workload{
		imageRef:   imageRef,
		churn:      opts.Churn,
		containers: opts.Containers,
		exited:     opts.Exited,
		gc:         opts.GC,
		rng:        rand.New(rand.NewPCG(opts.Seed, 0x636875726e)),
		gcMarked:   make(map[*sandbox]bool),
	}
}

// poisson draws the number of changes of a tick with mean lambda.
func poisson(r *rand.Rand, lambda float64) int {
	switch {
	case lambda <= 0:
		return 0
	case lambda > 30:
		// The normal approximation; exact enough at this size and O(1).
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64())))
	}
	limit, p, k := math.Exp(-lambda), 1.0, 0
	for {
		p *= r.Float64()
		if p <= limit {
			return k
		}
		k++
	}
}

// pick chooses up to n distinct elements of candidates, in random order.
func pick[T any](r *rand.Rand, candidates []T, n int) []T {
	n = min(n, len(candidates))
	for i := range n {
		j := i + r.IntN(len(candidates)-i)
		candidates[i], candidates[j] = candidates[j], candidates[i]
	}
	return candidates[:n]
}

func (w *workload) schedule(a action) { w.pending = append(w.pending, a) }

func (w *workload) markGC(sb *sandbox) {
	if w.gc && !w.gcMarked[sb] {
		w.gcMarked[sb] = true
		w.gcPods = append(w.gcPods, sb)
	}
}

// podConfig is what the kubelet would send to RunPodSandbox for pod n.
func podConfig(uid string, n uint64) *runtimeapi.PodSandboxConfig {
	name := "sim-" + strconv.FormatUint(n, 10)
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Uid: uid, Namespace: DefaultNamespace},
		Hostname: name,
		Labels: map[string]string{
			runtime.PodNameLabel:      name,
			runtime.PodNamespaceLabel: DefaultNamespace,
			runtime.PodUIDLabel:       uid,
			"app":                     "sim",
		},
		Annotations: map[string]string{
			"kubernetes.io/config.source": "api",
		},
		LogDirectory: "/var/log/pods/" + DefaultNamespace + "_" + name + "_" + uid,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD,
				Pid:     runtimeapi.NamespaceMode_CONTAINER,
				Ipc:     runtimeapi.NamespaceMode_POD,
			},
		}},
	}
}

// containerConfig is what the kubelet would send to CreateContainer for
// attempt of container name in sb: its labels and annotations.
func containerConfig(sb *sandbox, name string, attempt uint32) *runtimeapi.ContainerConfig {
	h := fnv.New32a()
	h.Write([]byte(name))
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: WorkloadImage, UserSpecifiedImage: WorkloadImage},
		Labels: map[string]string{
			runtime.PodNameLabel:       sb.md.GetName(),
			runtime.PodNamespaceLabel:  sb.md.GetNamespace(),
			runtime.PodUIDLabel:        sb.md.GetUid(),
			runtime.ContainerNameLabel: name,
		},
		Annotations: map[string]string{
			runtime.ContainerHashAnnotation:                    strconv.FormatUint(uint64(h.Sum32()), 16),
			runtime.ContainerRestartCountAnnotation:            strconv.FormatUint(uint64(attempt), 10),
			"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
			"io.kubernetes.container.terminationMessagePolicy": "File",
			"io.kubernetes.pod.terminationGracePeriod":         "30",
		},
		LogPath: name + "/" + strconv.FormatUint(uint64(attempt), 10) + ".log",
	}
}

// newPod runs a workload pod with its containers started, after exited
// earlier attempts of them.
func (w *workload) newPod(st *store, exited int, cause Cause, out *eventBuf) {
	n := w.podN
	w.podN++
	sb, err := st.runSandbox(podConfig(st.newUID(), n), "", cause, out)
	if err != nil {
		return // the UID is new, so the name is free
	}
	for j := range w.containers {
		name := "c" + strconv.Itoa(j)
		// Container j gets its share of the exited attempts, the first
		// ones one more when they do not divide evenly.
		attempts := exited / w.containers
		if j < exited%w.containers {
			attempts++
		}
		for a := range attempts {
			if c, err := st.createContainer(
				sb,
				containerConfig(sb, name, uint32(a)),
				w.imageRef,
				cause,
				out,
			); err == nil &&
				st.startContainer(c, cause, out) == nil {
				st.exitContainer(c, crashCode(w.rng), cause, out)
			}
		}
		c, err := st.createContainer(sb, containerConfig(sb, name, uint32(attempts)), w.imageRef, cause, out)
		if err == nil {
			_ = st.startContainer(c, cause, out)
		}
	}
}

// runningContainers lists the containers a crash or exit may hit: running
// in a ready pod not being replaced, started before this tick (so that a
// relist can see every container running before it ends), and not
// short-lived.
func runningContainers(st *store) []*container {
	var out []*container
	for _, c := range st.ctrOrder {
		if !c.removed && !c.short && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING &&
			c.startedTick < st.tick && !c.sb.removing && c.sb.state == runtimeapi.PodSandboxState_SANDBOX_READY {
			out = append(out, c)
		}
	}
	return out
}

// readyPods lists the pods that may be replaced or host a short-lived
// container: ready, not being replaced, and with no container started at
// or after tick before (so that a relist between ticks sees each container
// running before its pod goes).
func readyPods(st *store, before uint64) []*sandbox {
	var out []*sandbox
	for _, sb := range st.sbOrder {
		if !sb.removed && !sb.removing && sb.state == runtimeapi.PodSandboxState_SANDBOX_READY && sb.createdTick < before &&
			sb.startedTick < before {
			out = append(out, sb)
		}
	}
	return out
}

// tick applies one churn tick to st, whose lock the caller holds.
func (w *workload) tick(st *store, out *eventBuf) {
	st.tick++
	t := st.tick
	w.runDue(st, t, out)

	seconds := w.churn.Tick.Seconds()
	if n := poisson(w.rng, w.churn.Crashes*seconds); n > 0 {
		for _, c := range pick(w.rng, runningContainers(st), n) {
			st.exitContainer(c, crashCode(w.rng), CauseCrash, out)
			w.markGC(c.sb)
			w.schedule(action{due: t + 1 + uint64(w.rng.IntN(3)), kind: actRestart, c: c})
		}
	}
	if n := poisson(w.rng, w.churn.CleanExits*seconds); n > 0 {
		for _, c := range pick(w.rng, runningContainers(st), n) {
			st.exitContainer(c, 0, CauseExit, out)
			w.markGC(c.sb)
		}
	}
	if n := poisson(w.rng, w.churn.PodReplacements*seconds); n > 0 {
		for _, sb := range pick(w.rng, readyPods(st, t), n) {
			st.stopSandbox(sb, exitTerminated, CauseReplace, out)
			sb.removing = true
			w.schedule(action{due: t + 1, kind: actReplacePod, sb: sb})
		}
	}
	if n := poisson(w.rng, w.churn.ShortLived*seconds); n > 0 {
		if pods := readyPods(st, t+1); len(pods) > 0 {
			for range n {
				w.startShortLived(st, pods[w.rng.IntN(len(pods))], t, out)
			}
		}
	}
	w.collect(st, out)
}

func (w *workload) startShortLived(st *store, sb *sandbox, t uint64, out *eventBuf) {
	w.shortN++
	c, err := st.createContainer(
		sb,
		containerConfig(sb, "short-"+strconv.FormatUint(w.shortN, 10), 0),
		w.imageRef,
		CauseShortLived,
		out,
	)
	if err != nil {
		return
	}
	c.short = true
	if st.startContainer(c, CauseShortLived, out) == nil {
		w.schedule(action{due: t + 1 + uint64(w.rng.IntN(3)), kind: actShortExit, c: c})
	}
}

// runDue applies the actions due by tick t, in the order they were
// scheduled within a tick.
func (w *workload) runDue(st *store, t uint64, out *eventBuf) {
	var due []action
	w.pending = slices.DeleteFunc(w.pending, func(a action) bool {
		if a.due <= t {
			due = append(due, a)
			return true
		}
		return false
	})
	slices.SortStableFunc(due, func(a, b action) int { return cmp.Compare(a.due, b.due) })
	for _, a := range due {
		switch a.kind {
		case actRestart:
			c := a.c
			sb := c.sb
			if sb.removed || sb.removing || sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
				continue
			}
			next, err := st.createContainer(
				sb,
				containerConfig(sb, c.md.GetName(), c.md.GetAttempt()+1),
				w.imageRef,
				CauseRestart,
				out,
			)
			if err == nil {
				_ = st.startContainer(next, CauseRestart, out)
			}
		case actShortExit:
			if !a.c.removed && a.c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
				st.exitContainer(a.c, 0, CauseShortLived, out)
				w.schedule(action{due: t + 1, kind: actShortRemove, c: a.c})
			}
		case actShortRemove:
			if !a.c.removed {
				st.removeContainer(a.c, CauseShortLived, out)
			}
		case actReplacePod:
			if !a.sb.removed {
				st.removeSandbox(a.sb, CauseReplace, out)
			}
			w.newPod(st, 0, CauseReplace, out)
		}
	}
}

// collect removes, in each pod with new exits, the exited containers of
// a name but the newest, as the kubelet's garbage collector does with
// MaxPerPodContainer 1.
func (w *workload) collect(st *store, out *eventBuf) {
	pods := w.gcPods
	w.gcPods = nil
	clear(w.gcMarked)
	for _, sb := range pods {
		if sb.removed {
			continue
		}
		newest := make(map[string]*container)
		var old []*container
		// Newest first, so the first exited container of a name is kept.
		for i := len(sb.containers) - 1; i >= 0; i-- {
			c := sb.containers[i]
			if c.state != runtimeapi.ContainerState_CONTAINER_EXITED || c.short {
				continue
			}
			if newest[c.md.GetName()] == nil {
				newest[c.md.GetName()] = c
			} else {
				old = append(old, c)
			}
		}
		for i := len(old) - 1; i >= 0; i-- { // oldest first
			st.removeContainer(old[i], CauseGC, out)
		}
	}
}
