// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package node runs pleg as an operator runs it: its image, built by
// `make image`, installed by its chart with helm on a real single-node
// cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and a kubelet of one Kubernetes release, built from their Go modules,
// on containerd 2.x with a bridge pod network), and checked as a user
// sees it: the pod Ready by the kubelet's probes, pleg's events against
// the kubelet's own PLEG's, the node condition beside the kubelet's, a
// rolling update that loses nothing, the runbook's commands, uninstall.
package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/internal/testing/doccmd"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// work is the namespace of the test's workload.
const work = "work"

// TestNode installs pleg on a real node and checks it there, step by
// step: each step needs the ones before it.
func TestNode(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	docs := loadDocCommands(t)
	img := c.imageAsDocumented(t, ctx, docs)
	in := install{stateDir: filepath.Join(t.TempDir(), "state"), apiDir: filepath.Join(t.TempDir(), "api")}

	// One client follows pleg's events on the node's API socket from the
	// install to the end, across the rolling update.
	var f *follower
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"InstallPrevious", func(st *testing.T) {
			prev := c.previousRelease(st, ctx)
			f = follow(t, in.socket()) // the whole test's: it outlives the step
			c.installPrevious(st, ctx, prev, in, f)
		}},
		{"UpgradeFromPrevious", func(t *testing.T) { c.upgradeFromPrevious(t, ctx, img, in, f) }},
		{"EventsMatchTheKubelet", func(t *testing.T) { c.eventsMatchTheKubelet(t, ctx, f) }},
		{"ConditionBesideTheKubelet", func(t *testing.T) { c.conditionBesideTheKubelet(t, ctx) }},
		{"RollingUpdateLosesNothing", func(t *testing.T) { c.rollingUpdate(t, ctx, img, in, f) }},
		{"RuntimeFrozen", func(t *testing.T) { c.runtimeFrozen(t, ctx) }},
		{"DiagnosisWithTheRuntimeStopped", func(t *testing.T) { c.diagnosisWithTheRuntimeStopped(t, ctx, img, in, docs) }},
		{"ScrapedByPrometheus", func(t *testing.T) { c.scraped(t, ctx) }},
		{"OperatorCommands", func(t *testing.T) { c.operatorCommands(t, ctx, docs) }},
		{"Runbook", func(t *testing.T) { c.runbook(t, ctx, docs) }},
		{"Uninstall", func(t *testing.T) { c.uninstall(t, ctx, docs) }},
		{"DeployApplies", func(t *testing.T) { c.deployApplies(t, ctx, docs) }},
		{"InstallReady", func(t *testing.T) { c.installReady(t, ctx, img, in) }},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("%s failed: the steps after it need it", s.name)
		}
	}
	// Every command of the docs assigned to this node was run by a step.
	for _, left := range docs.left() {
		t.Errorf("%s: test/kube/node runs it (internal/testing/doccmd), but no step did", left)
	}
}

// installReady installs the chart as the README says, on the node the
// release was uninstalled from (its journal still in the state
// directory), and waits until the kubelet's probes find the pod ready and
// the condition is False again.
func (c *cluster) installReady(t *testing.T, ctx context.Context, img image, in install) {
	start := time.Now()
	c.helmInstall(t, ctx, "install", img, in)
	p, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ready, at := podReady(p)
	if !ready {
		t.Fatalf("helm --wait returned, pod %s not Ready: %v", p.Name, p.Status.Conditions)
	}
	t.Logf("pod %s Ready %v after its creation (%v after helm install began)",
		p.Name, at.Sub(p.CreationTimestamp.Time).Round(time.Second), time.Since(start).Round(time.Second))
	// Its probes are the kubelet's: the pod's restarts say they held.
	for _, s := range p.Status.ContainerStatuses {
		if s.RestartCount != 0 {
			t.Errorf("container %s restarted %d times", s.Name, s.RestartCount)
		}
	}
	if err := c.WaitNode(ctx, nodeName, "PLEGDegraded False again", func(n *corev1.Node) bool {
		pc := condition(n, "PLEGDegraded")
		return pc != nil && pc.Status == corev1.ConditionFalse
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("PLEGDegraded False %v after helm install began", time.Since(start).Round(100*time.Millisecond))
}

// eventsMatchTheKubelet runs a workload through the API and compares
// pleg's events, read on the node's API socket, with the kubelet's PLEG's
// in its log.
func (c *cluster) eventsMatchTheKubelet(t *testing.T, ctx context.Context, f *follower) {
	u0, err := c.plegUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.workNamespace(t, ctx)
	// A Deployment whose container exits 3 after a second and restarts, a
	// Job that completes, a pod deleted while it runs.
	if _, err := c.cs.AppsV1().Deployments(work).Create(ctx, crashDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.BatchV1().Jobs(work).Create(ctx, completingJob(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	doomed, err := c.cs.CoreV1().Pods(work).Create(ctx, testPod("doomed", corev1.RestartPolicyAlways, "pause"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.WaitFor(ctx, "the workload", func() (bool, error) {
		return c.workloadDone(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.cs.CoreV1().Pods(work).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.uids[string(doomed.UID)] = work + "/doomed"
	if err := kubetest.WaitFor(ctx, "the doomed pod's removal", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods(work).Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	c.waitSameEvents(t, ctx, f, "the workload")
	if u1, err := c.plegUsage(ctx); err == nil {
		t.Logf("pleg under the workload: %s", u0.over(u1))
	}

	// pleg names each pod as the kubelet does, and reports the removal
	// of the deleted pod's sandbox and container, which the kubelet's log
	// never shows: its garbage collection removes them within a minute
	// or two.
	removed := map[bool]int{}
	if err := kubetest.WaitFor(ctx, "ContainerRemoved of the deleted pod's sandbox and container", func() (bool, error) {
		clear(removed)
		for _, ev := range f.snapshot() {
			name, ok := c.uids[ev.PodUID]
			if !ok {
				continue
			}
			if got := ev.PodNamespace + "/" + ev.PodName; got != name {
				t.Fatalf("pleg names pod %s %q, the API %q", ev.PodUID, got, name)
			}
			if ev.Type == "ContainerRemoved" && ev.PodUID == string(doomed.UID) {
				removed[ev.Sandbox]++
			}
		}
		return removed[true] >= 1 && removed[false] >= 1, nil
	}); err != nil {
		t.Fatal(err)
	}
	if removed[true] != 1 || removed[false] != 1 {
		t.Errorf("ContainerRemoved of the deleted pod: %d sandbox, %d container; want 1 and 1", removed[true], removed[false])
	}
}

// workloadDone reports whether the crash-looping container restarted
// twice, the Job completed and the doomed pod runs.
func (c *cluster) workloadDone(ctx context.Context) (bool, error) {
	pods, err := c.cs.CoreV1().Pods(work).List(ctx, metav1.ListOptions{LabelSelector: "app=crash"})
	if err != nil {
		return false, err
	}
	restarts := 0
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			restarts = max(restarts, int(s.RestartCount))
		}
	}
	job, err := c.cs.BatchV1().Jobs(work).Get(ctx, "done", metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	p, err := c.cs.CoreV1().Pods(work).Get(ctx, "doomed", metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	ok := restarts >= 2 && job.Status.Succeeded == 1 && p.Status.Phase == corev1.PodRunning
	return ok, fmt.Errorf("%d restarts, job succeeded %d, doomed %s", restarts, job.Status.Succeeded, p.Status.Phase)
}

// waitSameEvents waits until pleg's Started and Died events of the
// workload's pods are the kubelet's, event for event, and fails with the
// difference if they do not become so.
func (c *cluster) waitSameEvents(t *testing.T, ctx context.Context, f *follower, what string) {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(work).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		c.uids[string(p.UID)] = p.Namespace + "/" + p.Name
	}
	uids := c.uids
	var onlyKubelet, onlyPleg, twice []kubetest.PLEGKey
	var kubeletN, plegN int
	err = kubetest.WaitFor(ctx, "pleg's events of "+what+" to be the kubelet's", func() (bool, error) {
		if err := f.err(); err != nil {
			t.Fatalf("the follower of pleg's events stopped: %v", err)
		}
		k, misnamed, err := c.kubelet.PLEGEventsOf(uids)
		if err != nil {
			return false, err
		}
		for _, m := range misnamed {
			t.Error(m)
		}
		var p []kubetest.PLEGKey
		for _, ev := range f.snapshot() {
			if _, ok := uids[ev.PodUID]; ok && (ev.Type == "ContainerStarted" || ev.Type == "ContainerDied") {
				p = append(p, kubetest.PLEGKey{PodUID: ev.PodUID, Type: ev.Type, ID: ev.ContainerID})
			}
		}
		kubeletN, plegN = len(k), len(p)
		onlyKubelet, onlyPleg, twice = kubetest.ComparePLEG(k, p)
		return len(onlyKubelet) == 0 && len(onlyPleg) == 0 && len(twice) == 0, nil
	})
	if err != nil {
		t.Fatalf("%v\nonly the kubelet: %v\nonly pleg: %v\ntwice: %v", err, onlyKubelet, onlyPleg, twice)
	}
	t.Logf("%s: pleg's %d Started and Died events are the kubelet's %d", what, plegN, kubeletN)
}

func testPod(name string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec:       podSpec(restart, args...),
	}
}

func podSpec(restart corev1.RestartPolicy, args ...string) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                 restart,
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		AutomountServiceAccountToken:  ptr.To(false),
		Containers: []corev1.Container{{
			Name: "main", Image: runtimetest.TestImage, ImagePullPolicy: corev1.PullNever, Args: args,
		}},
	}
}

func crashDeployment() *appsv1.Deployment {
	l := map[string]string{"app": "crash"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "crash"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       podSpec(corev1.RestartPolicyAlways, "crashloop", "3", "1s"),
			},
		},
	}
}

func completingJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "done"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{Spec: podSpec(corev1.RestartPolicyNever, "exit", "0", "1s")},
		},
	}
}

// conditionBesideTheKubelet checks pleg's condition, written with the
// token the kubelet projected into its pod, through several of the
// kubelet's own status writes, and that the token reaches no other node.
func (c *cluster) conditionBesideTheKubelet(t *testing.T, ctx context.Context) {
	var heartbeats []time.Time
	if err := kubetest.WaitFor(ctx, "three status writes of the kubelet with PLEGDegraded beside them", func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pc, ready := condition(n, "PLEGDegraded"), condition(n, corev1.NodeReady)
		if pc == nil || ready == nil {
			return false, fmt.Errorf("conditions %v", conditionsOf(n))
		}
		if pc.Status != corev1.ConditionFalse || pc.Reason != "PLEGIsHealthy" {
			return false, fmt.Errorf("PLEGDegraded %s %s: %s", pc.Status, pc.Reason, pc.Message)
		}
		if hb := ready.LastHeartbeatTime.Time; len(heartbeats) == 0 || hb.After(heartbeats[len(heartbeats)-1]) {
			heartbeats = append(heartbeats, hb)
		}
		return len(heartbeats) >= 3, fmt.Errorf("%d kubelet heartbeats so far", len(heartbeats))
	}); err != nil {
		t.Fatal(err)
	}
	c.tokenHeldToItsNode(t, ctx)
}

// rollingUpdate rolls the DaemonSet with helm upgrade while a container
// keeps restarting, and checks that a client following the API socket
// across the rollout gets no Gap and every event once.
func (c *cluster) rollingUpdate(t *testing.T, ctx context.Context, img image, in install, f *follower) {
	old, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Let the churn run across the rollout: the crash loop's backoff grows
	// to minutes, so a pod that restarts every few seconds joins it.
	churn, err := c.cs.CoreV1().Pods(work).Create(ctx, testPod("churn", corev1.RestartPolicyNever, "exit", "0", "1s"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The operator's own tuning, which rolls every pod: runtime calls cut
	// at 10 s instead of 2 min, so that the next step's frozen runtime is
	// reported while the kubelet's own PLEG is still within its 3 min.
	c.helmInstall(t, ctx, "upgrade", img, in, "--set", "extraArgs={--timeout=10s}")
	cur, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cur.UID == old.UID {
		t.Fatalf("helm upgrade left pod %s in place", old.Name)
	}
	if err := kubetest.WaitFor(ctx, "the churn pod to complete", func() (bool, error) {
		p, err := c.cs.CoreV1().Pods(work).Get(ctx, "churn", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, err
	}); err != nil {
		t.Fatal(err)
	}
	c.uids[string(churn.UID)] = work + "/churn"
	// The follower began before the workload: all the kubelet reported
	// of it, before, during and after the rollout, it must hold.
	c.waitSameEvents(t, ctx, f, "the workload across the rollout")
	evs := f.snapshot()
	var last uint64
	for _, ev := range evs {
		if ev.Type == api.TypeGap {
			t.Errorf("a Gap across the rollout: %+v", ev)
		}
		if ev.Seq <= last {
			t.Errorf("sequence number %d after %d", ev.Seq, last)
		}
		last = ev.Seq
	}
	t.Logf("rollout from %s to %s: %d events followed, no Gap", old.Name, cur.Name, len(evs))
}

// stopRuntime stops containerd (SIGSTOP) and returns what resumes it, at
// most once, and when it stopped. The test's cleanup resumes it whatever
// happens, even a Fatal in a helper.
func (c *cluster) stopRuntime(t *testing.T) (resume func(), at time.Time) {
	pid := c.runtime.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	at = time.Now()
	resume = sync.OnceFunc(func() {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(resume)
	return resume, at
}

// runtimeFrozen freezes containerd and checks that pleg's condition turns
// on with an event and clears when containerd runs again, before the
// kubelet's own PLEG would be unhealthy.
func (c *cluster) runtimeFrozen(t *testing.T, ctx context.Context) {
	thaw, frozen := c.stopRuntime(t)
	defer thaw()
	var reason string
	if err := kubetest.WaitFor(ctx, "PLEGDegraded True", func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pc := condition(n, "PLEGDegraded")
		if pc == nil {
			return false, nil
		}
		reason = pc.Reason
		return pc.Status == corev1.ConditionTrue, fmt.Errorf("%s %s: %s", pc.Status, pc.Reason, pc.Message)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("PLEGDegraded True (%s) %v after containerd froze", reason, time.Since(frozen).Round(time.Second))
	// pleg serves what it is for, the runtime's sickness included: its
	// pod stays Ready by the kubelet's probes, so that a node whose
	// runtime hangs holds no rollout of pleg (the condition says it).
	if err := kubetest.WaitFor(ctx, "three readiness probes of the kubelet", func() (bool, error) {
		return time.Since(frozen) > 3*10*time.Second, nil // the chart's periodSeconds: 10
	}); err != nil {
		t.Fatal(err)
	}
	p, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ready, since := podReady(p); !ready || since.After(frozen) {
		t.Errorf("with the runtime frozen, pleg's pod Ready=%v since %v (frozen at %v): a sick runtime made pleg unready",
			ready, since, frozen)
	}
	if err := kubetest.WaitFor(ctx, "an event on the node naming the cause", func() (bool, error) {
		evs, err := c.cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == nodeName && e.Reason == reason {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none with reason %s on node %s", len(evs.Items), reason, nodeName)
	}); err != nil {
		t.Fatal(err)
	}
	thaw()
	if err := kubetest.WaitFor(ctx, "PLEGDegraded False again", func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pc := condition(n, "PLEGDegraded")
		return pc != nil && pc.Status == corev1.ConditionFalse, nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("PLEGDegraded False again %v after the runtime was frozen", time.Since(frozen).Round(time.Second))
}

// runbook runs the commands of docs/runbook.md for a paged node whose
// runtime answers, as they are written there, with this node for the
// alert's: in the pleg pod, through kubectl exec.
func (c *cluster) runbook(t *testing.T, ctx context.Context, docs *docCommands) {
	work := t.TempDir()
	inPod := docs.take(t, "docs/runbook.md", "NODE=", "POD=", "kubectl exec", "kubectl logs")
	// The help's example of doctor in the pod, too.
	inPod = append(inPod, docs.take(t, doccmd.HelpPrefix+"pleg doctor", "kubectl exec")...)
	out := c.shell(t, ctx, work, inPod, func(line string) string {
		switch {
		case strings.HasPrefix(line, "NODE="):
			// The alert's node is this one; the rest of the line as written.
			_, rest, _ := strings.Cut(line, " ")
			return "NODE=" + nodeName + " " + rest
		case strings.Contains(line, "pleg watch"):
			// It follows until interrupted, as a person would: 5 s.
			return "timeout 5 " + line + " || [ $? -eq 124 ]"
		}
		return c.onThisNode(line)
	})
	// doctor in the pod reached the runtime the chart gave it, and the
	// report it wrote to standard output is a page.
	if !strings.Contains(out, "containerd") {
		t.Errorf("pleg doctor in the pod does not name the runtime:\n%s", out)
	}
	if page, err := os.ReadFile(filepath.Join(work, "report.html")); err != nil || !strings.Contains(string(page), "<html") {
		t.Errorf("doctor --html - > report.html: %v, %.200q", err, page)
	}
	t.Logf("the runbook's commands in the pod on %s:\n%s", nodeName, out)
}

// operatorCommands runs docs/kubernetes.md's and docs/cli.md's commands
// for a cluster where pleg runs: Pod Security for another namespace, the
// per-node runtime labels, the condition read from the nodes, doctor's
// report from the DaemonSet.
func (c *cluster) operatorCommands(t *testing.T, ctx context.Context, docs *docCommands) {
	// The docs' other namespace, as an operator would have created it.
	c.run(t, ctx, "kubectl", "create", "namespace", "pleg-system")
	t.Cleanup(func() {
		_, _ = c.tryRun(context.Background(), "kubectl", "delete", "namespace", "pleg-system", "--wait=false")
	})
	c.shell(t, ctx, "", docs.take(t, "docs/kubernetes.md", "kubectl label namespace pleg-system"), nil)
	if got := c.run(t, ctx, "kubectl", "get", "namespace", "pleg-system",
		"-o", "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}"); got != "privileged" {
		t.Errorf("pleg-system's enforce level: %q", got)
	}

	c.shell(t, ctx, "", docs.take(t, "docs/kubernetes.md", "kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.nodeInfo"), nil)
	if got := c.run(t, ctx, "kubectl", "get", "node", nodeName, "-o", "jsonpath={.metadata.labels.plegkit\\.io/runtime}"); got != "containerd" {
		t.Errorf("the docs' runtime label on %s: %q, want containerd", nodeName, got)
	}

	out := c.shell(t, ctx, "", docs.take(t, "docs/kubernetes.md", "kubectl describe node"), c.onThisNode)
	if !strings.Contains(out, "PLEGDegraded") {
		t.Errorf("kubectl describe node shows no PLEGDegraded condition:\n%s", out)
	}
	// Stale reporters and degraded nodes: none here, and the commands run.
	out = c.shell(t, ctx, "", docs.take(t, "docs/kubernetes.md",
		"kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{\"\\t\"}"), nil)
	if strings.Contains(out, nodeName) {
		t.Errorf("the docs' queries list %s as stale or degraded:\n%s", nodeName, out)
	}

	work := t.TempDir()
	c.shell(t, ctx, work, docs.take(t, "docs/cli.md", "kubectl"), c.onThisNode)
	if page, err := os.ReadFile(filepath.Join(work, "pleg-doctor.html")); err != nil || !strings.Contains(string(page), "<html") {
		t.Errorf("docs/cli.md's doctor --html: %v, %.200q", err, page)
	}
}

// uninstall removes the release as docs/kubernetes.md says, with helm
// uninstall alone, and checks what it leaves: the condition Unknown,
// written by the pod as it stopped (the chart's pre-delete hook stops the
// DaemonSet before helm deletes its ServiceAccount and role), and none of
// the chart's objects, the hook's included.
func (c *cluster) uninstall(t *testing.T, ctx context.Context, docs *docCommands) {
	before, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pc := condition(before, "PLEGDegraded"); pc == nil || pc.Status != corev1.ConditionFalse {
		t.Fatalf("before the uninstall, PLEGDegraded is %+v, want False", pc)
	}
	start := time.Now()
	c.shell(t, ctx, "", docs.take(t, "docs/kubernetes.md", "helm uninstall"), nil)
	t.Logf("helm uninstall returned after %v", time.Since(start).Round(100*time.Millisecond))
	// The hook has run when helm uninstall returns: the condition is
	// written already.
	n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pc := condition(n, "PLEGDegraded")
	switch {
	case pc == nil || pc.Status != corev1.ConditionUnknown || pc.Reason != "PLEGStopped":
		t.Fatalf("after helm uninstall, PLEGDegraded is %+v, want Unknown (PLEGStopped)", pc)
	case !strings.HasPrefix(pc.Message, "pleg stopped at"):
		// The hook's own words: the pod could not say it.
		t.Errorf("the condition was written by the hook, not by the pod as it stopped: %s", pc.Message)
	}
	t.Logf("PLEGDegraded %s %s: %s", pc.Status, pc.Reason, pc.Message)
	// helm uninstall returns once it asked for the deletions.
	var left string
	if err := kubetest.WaitFor(ctx, "no object of the release", func() (bool, error) {
		out, err := c.tryRun(ctx, "kubectl", "get",
			"daemonsets,pods,jobs,serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings,networkpolicies,"+
				"validatingadmissionpolicies,validatingadmissionpolicybindings,configmaps,secrets",
			"-A", "-l", "app.kubernetes.io/instance="+release, "-o", "name")
		left = strings.TrimSpace(out)
		return err == nil && left == "", err
	}); err != nil {
		t.Errorf("after helm uninstall, objects of the release remain: %v\n%s", err, left)
	}
}

// deployApplies applies deploy/ as the README says, without Helm, on the
// cluster the release was uninstalled from: every object is created and
// the DaemonSet schedules its pod here. Then it is deleted as
// docs/kubernetes.md says without Helm.
func (c *cluster) deployApplies(t *testing.T, ctx context.Context, docs *docCommands) {
	t.Cleanup(func() {
		if _, err := c.tryRun(context.Background(), "kubectl", "delete", "-f", filepath.Join(repoRoot(), "deploy"),
			"--ignore-not-found", "--wait=false"); err != nil {
			t.Errorf("kubectl delete -f deploy/: %v", err)
		}
	})
	out := c.shell(t, ctx, "", docs.take(t, "README.md", "kubectl apply -f deploy/"), nil)
	if strings.Contains(out, "Warning") {
		t.Errorf("kubectl apply -f deploy/ warns:\n%s", out)
	}
	if err := kubetest.WaitFor(ctx, "deploy/'s DaemonSet schedules a pod on the node", func() (bool, error) {
		ds, err := c.cs.AppsV1().DaemonSets(namespace).Get(ctx, release, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ds.Status.DesiredNumberScheduled == 1 && ds.Status.CurrentNumberScheduled == 1, nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl apply -f deploy/:\n%s", out)

	// Removed as docs/kubernetes.md says without Helm: the DaemonSet
	// first, in the foreground, then the rest; nothing of deploy/ stays.
	start := time.Now()
	out = c.shell(t, ctx, "", docs.take(t, "docs/kubernetes.md", "kubectl delete -f deploy/"), nil)
	t.Logf("kubectl delete of deploy/ took %v:\n%s", time.Since(start).Round(100*time.Millisecond), out)
	left, err := c.tryRun(ctx, "kubectl", "get", "-f", filepath.Join(repoRoot(), "deploy"), "--ignore-not-found", "-o", "name")
	if err != nil || strings.TrimSpace(left) != "" {
		t.Errorf("after kubectl delete of deploy/, left: %q (%v)", left, err)
	}
}
