// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/internal/testing/cachelock"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// previousCommit is the release an operator upgrades from: its chart and
// its image, built from that commit by its own make image. Until the
// first tag it is the commit before the journal's last format change
// (format version 3, "journal: format version 4, ..." came after it), so
// that the upgrade reads a journal of the older format; from v0.1.0 on,
// it is the last release's commit.
const (
	previousCommit        = "8e3241d9136cb61a1e5bbb88960fad986b699a39"
	previousFormatVersion = 3
)

// previousRelease builds the previous release's image (for this machine's
// platform) and copies its chart, once per machine into the cache, and
// imports the image into the node's containerd. The commit is read from
// the repository's history (git archive), so the checkout needs it: a
// shallow clone does not have it.
func (c *cluster) previousRelease(t *testing.T, ctx context.Context) image {
	t.Helper()
	cache, err := runtimetest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "previous", previousCommit[:12]+"-"+goruntime.GOARCH)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := cachelock.Acquire(dir + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		start := time.Now()
		t.Logf("building the previous release, %s, into %s, once", previousCommit[:12], dir)
		buildPrevious(t, ctx, dir)
		t.Logf("built the previous release in %v", time.Since(start).Round(time.Second))
	}
	ref, err := os.ReadFile(filepath.Join(dir, "image", "ref"))
	if err != nil {
		t.Fatal(err)
	}
	socket := strings.TrimPrefix(c.runtime.Endpoint, "unix://")
	cmd := exec.CommandContext(ctx, c.runtime.Bin.Ctr, "--address", socket, "--namespace", "k8s.io",
		"images", "import", filepath.Join(dir, "image", "pleg.tar"))
	cmd.Env = append(os.Environ(), "CONTAINERD_SNAPSHOTTER=native")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ctr images import of the previous release: %v\n%s", err, out)
	}
	return image{ref: strings.TrimSpace(string(ref)), chart: filepath.Join(dir, "chart")}
}

// buildPrevious writes into dir the previous release's image, as its own
// Makefile builds it, and its chart.
func buildPrevious(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	src := t.TempDir()
	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	root := repoRoot()
	if _, err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", previousCommit+"^{commit}").Output(); err != nil {
		t.Fatalf("the previous release's commit %s is not in this checkout's history (a shallow clone?): %v", previousCommit, err)
	}
	run(root, "bash", "-c", "set -o pipefail; git archive --format=tar "+previousCommit+" | tar -x -C "+src)
	created := strings.TrimSpace(run(root, "git", "log", "-1", "--format=%ct", previousCommit))
	// What git describe named it: no tag was before it.
	version := previousCommit[:7]
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	run(src, "make", "image", "VERSION="+version, "REVISION="+previousCommit, "SOURCE_DATE_EPOCH="+created,
		"IMAGE_TAG="+version, "IMAGE_PLATFORMS=linux/"+goruntime.GOARCH, "IMAGE_DIR="+filepath.Join(tmp, "image"))
	run(src, "cp", "-r", filepath.Join(src, "charts", "pleg"), filepath.Join(tmp, "chart"))
	if err := os.WriteFile(filepath.Join(tmp, "done"), []byte(previousCommit+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
}

// installPrevious installs the previous release as the README says, with
// the node's paths, and runs a pod to completion under it: the journal
// then holds its events, in the previous format.
func (c *cluster) installPrevious(t *testing.T, ctx context.Context, prev image, in install, f *follower) {
	start := time.Now()
	c.helmInstall(t, ctx, "install", prev, in)
	p, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ready, _ := podReady(p); !ready || p.Spec.Containers[0].Image != prev.ref {
		t.Fatalf("pod %s: ready %v, image %s; want the previous release's %s Ready", p.Name, ready, p.Spec.Containers[0].Image, prev.ref)
	}
	// The previous pleg's stream opened for the follower, and its
	// condition written: what the upgrade must keep.
	f.waitOpened(t, ctx)
	if err := c.WaitNode(ctx, nodeName, "the previous release's PLEGDegraded False", func(n *corev1.Node) bool {
		pc := condition(n, "PLEGDegraded")
		return pc != nil && pc.Status == corev1.ConditionFalse
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the previous release (%s) Ready and its condition False %v after helm install began", prev.ref,
		time.Since(start).Round(time.Second))
	c.workNamespace(t, ctx)
	before, err := c.cs.CoreV1().Pods(work).Create(ctx, testPod("before", corev1.RestartPolicyNever, "exit", "0", "1s"),
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.uids[string(before.UID)] = work + "/before"
	if err := kubetest.WaitFor(ctx, "the previous release's ContainerDied of the pod before", func() (bool, error) {
		return slices.ContainsFunc(f.snapshot(), func(ev api.Event) bool {
			return ev.PodUID == string(before.UID) && ev.Type == "ContainerDied" && !ev.Sandbox
		}), f.err()
	}); err != nil {
		t.Fatal(err)
	}
	versions := segmentVersions(t, in.stateDir)
	if len(versions) == 0 || slices.ContainsFunc(versions, func(s segment) bool { return s.version != previousFormatVersion }) {
		t.Fatalf("the previous release's journal: %v, want format version %d", versions, previousFormatVersion)
	}
	t.Logf("the previous release's journal: %v; %d events followed", versions, len(f.snapshot()))
}

// upgradeFromPrevious runs helm upgrade from the previous release to this
// checkout's chart and image, with their defaults, while a pod restarts:
// the follower, which began under the previous release, gets no Gap and
// no number twice; the new pleg reads the previous journal (the history
// of the pod that ran before the upgrade, with the numbers the previous
// pleg gave); the node's condition is never absent nor True, and comes
// back False. Then the new pod is checked as a fresh install's: Ready by
// the kubelet's probes, no restart, its cost at rest.
func (c *cluster) upgradeFromPrevious(t *testing.T, ctx context.Context, img image, in install, f *follower) {
	old, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A pod that fails and restarts across the rollout.
	across, err := c.cs.CoreV1().Pods(work).Create(ctx, testPod("across", corev1.RestartPolicyOnFailure, "exit", "3", "2s"),
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.uids[string(across.UID)] = work + "/across"
	if err := kubetest.WaitFor(ctx, "the pod across to fail once", func() (bool, error) {
		return slices.ContainsFunc(f.snapshot(), func(ev api.Event) bool {
			return ev.PodUID == string(across.UID) && ev.Type == "ContainerDied" && !ev.Sandbox
		}), f.err()
	}); err != nil {
		t.Fatal(err)
	}
	watch := c.watchCondition(ctx)
	start := time.Now()
	c.helmInstall(t, ctx, "upgrade", img, in)
	p, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.UID == old.UID || p.Spec.Containers[0].Image != img.ref {
		t.Fatalf("after helm upgrade, pod %s runs %s; want a new pod of %s", p.Name, p.Spec.Containers[0].Image, img.ref)
	}
	ready, at := podReady(p)
	if !ready {
		t.Fatalf("helm --wait returned, pod %s not Ready: %v", p.Name, p.Status.Conditions)
	}
	t.Logf("upgraded from %s to %s: pod %s Ready %v after its creation (%v after helm upgrade began)", old.Spec.Containers[0].Image,
		img.ref, p.Name, at.Sub(p.CreationTimestamp.Time).Round(time.Second), time.Since(start).Round(time.Second))
	for _, s := range p.Status.ContainerStatuses {
		if s.RestartCount != 0 {
			t.Errorf("container %s restarted %d times", s.Name, s.RestartCount)
		}
	}

	// The condition: False before, Unknown (PLEGStopped) while no pleg
	// ran, False again; never absent, never True.
	seen := watch.until(t, ctx, func(s conditionState) bool { return s.status == corev1.ConditionFalse && s.at.After(at) })
	var unknown time.Duration
	for i, s := range seen {
		switch {
		case s.status == "":
			t.Errorf("the condition was absent at %v: %v", s.at, seen)
		case s.status == corev1.ConditionTrue:
			t.Errorf("the condition turned True across the upgrade: %v", seen)
		case s.status == corev1.ConditionUnknown && s.reason != "PLEGStopped":
			t.Errorf("the condition Unknown for %s: %v", s.reason, seen)
		case s.status == corev1.ConditionUnknown && i+1 < len(seen):
			unknown += seen[i+1].at.Sub(s.at)
		}
	}
	t.Logf("the condition across the upgrade: %v (Unknown for %v)", seen, unknown.Round(100*time.Millisecond))

	// The follower's events: no Gap, no number twice, and the pod across
	// the rollout's events on both sides.
	if err := kubetest.WaitFor(ctx, "the new pleg's first event of the pod across", func() (bool, error) {
		return slices.ContainsFunc(f.snapshot(), func(ev api.Event) bool {
			return ev.PodUID == string(across.UID) && ev.Time.After(at)
		}), f.err()
	}); err != nil {
		t.Fatal(err)
	}
	evs := f.snapshot()
	var last uint64
	var gaps, twice int
	for _, ev := range evs {
		if ev.Type == api.TypeGap {
			gaps++
			t.Errorf("a Gap across the upgrade: %+v", ev)
		}
		if ev.Seq <= last {
			twice++
			t.Errorf("sequence number %d after %d", ev.Seq, last)
		}
		last = ev.Seq
	}
	// The DaemonSet makes the new pod once the old one is gone: what
	// happened before its creation, the previous pleg told.
	var oldSide, newSide, afterRestart int
	for _, ev := range evs {
		if ev.Time.Before(p.CreationTimestamp.Time) {
			oldSide++
		} else {
			newSide++
		}
		if ev.AfterRestart {
			afterRestart++
		}
	}
	t.Logf("the follower across the upgrade: %d events, %d told by the previous pleg and %d by the new one "+
		"(%d found after its start), %d Gaps, %d numbers out of order or twice",
		len(evs), oldSide, newSide, afterRestart, gaps, twice)

	// The new pleg reads the previous journal: the pod that ran before the
	// upgrade, with the numbers the previous pleg gave its events.
	c.checkPreviousHistory(t, ctx, in, f)
	t.Logf("the journal after the upgrade: %v", segmentVersions(t, in.stateDir))

	// Its cost at rest: the node runs only pleg and the test's pods.
	u0, err := c.plegUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Second) // a window to measure over, not a wait
	u1, err := c.plegUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pleg at rest: %s", u0.over(u1))
}

// checkPreviousHistory reads, through the new pleg, the history of the
// pod that ran under the previous one: its events as the follower got
// them from the previous pleg, number for number.
func (c *cluster) checkPreviousHistory(t *testing.T, ctx context.Context, in install, f *follower) {
	t.Helper()
	var uid string
	for u, name := range c.uids {
		if name == work+"/before" {
			uid = u
		}
	}
	var want []string
	for _, ev := range f.snapshot() {
		if ev.PodUID == uid {
			want = append(want, fmt.Sprintf("%d %s", ev.Seq, ev.Type))
		}
	}
	cl, err := client.New("unix://"+in.socket(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := cl.History(ctx, api.HistoryQuery{UID: uid})
	if err != nil {
		t.Fatalf("the new pleg's history of the pod before: %v", err)
	}
	var got []string
	for _, ev := range h.Events {
		got = append(got, fmt.Sprintf("%d %s", ev.Seq, ev.Type))
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("the new pleg's history of the pod before the upgrade: %v; the previous pleg sent %v", got, want)
	}
	t.Logf("the pod before the upgrade, read back by the new pleg from the previous journal: %v (journal from %d)", got, h.FirstSeq)
}

// workNamespace creates the namespace of the test's workload, once, and
// waits for its default service account.
func (c *cluster) workNamespace(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := kubetest.EnsureNamespace(ctx, c.cs, work); err != nil {
		t.Fatal(err)
	}
}

// segment is a journal segment and its format version.
type segment struct {
	name    string
	version uint16
}

func (s segment) String() string { return fmt.Sprintf("%s v%d", s.name, s.version) }

// segmentVersions reads the format version in each segment's header (the
// journal package's: 8 bytes of magic, then the version, little-endian).
func segmentVersions(t *testing.T, stateDir string) []segment {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(stateDir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	var segs []segment
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil || len(b) < 10 {
			t.Fatalf("segment %s: %v (%d bytes)", n, err, len(b))
		}
		segs = append(segs, segment{filepath.Base(n), binary.LittleEndian.Uint16(b[8:10])})
	}
	return segs
}

// conditionState is the node's PLEGDegraded at a moment: status empty
// when the node has none.
type conditionState struct {
	at             time.Time
	status         corev1.ConditionStatus
	reason         string
	lastTransition time.Time
}

func (s conditionState) String() string {
	if s.status == "" {
		return s.at.Format("15:04:05.0") + " absent"
	}
	return fmt.Sprintf("%s %s %s", s.at.Format("15:04:05.0"), s.status, s.reason)
}

// conditionWatch polls the node's condition and keeps each change.
type conditionWatch struct {
	mu     sync.Mutex
	states []conditionState
	cancel context.CancelFunc
	done   chan struct{}
}

// watchCondition polls the node's PLEGDegraded every 200 ms.
func (c *cluster) watchCondition(ctx context.Context) *conditionWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &conditionWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
				s := conditionState{at: time.Now()}
				if pc := condition(n, "PLEGDegraded"); pc != nil {
					s.status, s.reason, s.lastTransition = pc.Status, pc.Reason, pc.LastTransitionTime.Time
				}
				w.mu.Lock()
				if len(w.states) == 0 || w.states[len(w.states)-1].status != s.status ||
					w.states[len(w.states)-1].reason != s.reason {
					w.states = append(w.states, s)
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// until waits for a state that done accepts, stops the watch and returns
// the changes seen.
func (w *conditionWatch) until(t *testing.T, ctx context.Context, done func(conditionState) bool) []conditionState {
	t.Helper()
	defer func() { w.cancel(); <-w.done }()
	var seen []conditionState
	err := kubetest.WaitFor(ctx, "the condition False again", func() (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		seen = slices.Clone(w.states)
		return len(seen) > 0 && done(seen[len(seen)-1]), nil
	})
	if err != nil {
		t.Fatalf("%v: %v", err, seen)
	}
	return seen
}
