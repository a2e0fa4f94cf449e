// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package simnode runs a real kubelet with `pleg sim` as its container
// runtime: the kubelet of the release test/kube builds, registered to
// kubetest's API server, its pods bound to it by the test (no scheduler),
// on the simulator served in-process; pleg's generator relists the same
// simulated node beside it, and the two PLEGs' events are compared.
package simnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// The node's names and address. The kubelet refuses a loopback node IP,
// so the node has an address of its own on an interface of its own.
const (
	nodeName  = "pleg-sim-node"
	nodeToken = "pleg-sim-node-token"
	linkName  = "plegsim0"
	nodeCIDR  = "10.245.0.1/32"
	nodeIP    = "10.245.0.1"
	// cgroupRoot keeps this kubelet's pod cgroups apart from those of
	// any other kubelet on the machine.
	cgroupRoot = "/plegsim"
	work       = "simwork"
)

// unavailable ends the test because the node could not start: a failure
// under CI=true, a skip otherwise.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if kubetest.InCI() {
		t.Fatalf("a kubelet on the simulator is required under CI=true but could not start: %v", err)
	}
	t.Skipf("skipping, no kubelet on the simulator (set CI=true to make this a failure): %v", err)
}

// node is a kubelet on a simulated runtime, registered to an API server,
// with pleg's generator on the same runtime.
type node struct {
	server  *kubetest.Server
	sim     *sim.Sim
	kubelet *kubetest.Kubelet
	cs      kubernetes.Interface
	pleg    *collector
}

// startNode starts the simulator with latency, the API server, pleg's
// generator and the kubelet, and stops them when the test ends.
func startNode(t testing.TB, latency string, kubeletOpts kubetest.KubeletOptions) *node {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, errors.New("a kubelet needs root"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	logf := func(f string, a ...any) { t.Logf(f, a...) }
	bin, err := kubetest.BuildNode(ctx, logf)
	if err != nil {
		unavailable(t, err)
	}
	// A bridge without ports, for its address alone: this kernel has no
	// dummy interfaces.
	delLink, err := kubetest.Bridge(linkName, nodeCIDR)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := delLink(); err != nil {
			t.Error(err)
		}
	})
	n := &node{}
	n.server, err = kubetest.StartWith(ctx, logf, kubetest.Options{
		Address: nodeIP,
		Tokens:  []kubetest.Token{{Token: nodeToken, User: "system:node:" + nodeName, Groups: []string{"system:nodes"}}},
		Nodes:   true,
	})
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := n.server.Stop(); err != nil {
			t.Error(err)
		}
	})
	model, err := sim.LatencyPreset(latency)
	if err != nil {
		t.Fatal(err)
	}
	// No pods of its own and no churn: every pod is the kubelet's. The
	// kubelet collects exited containers itself.
	// Its image file system is a directory that exists: the kubelet's
	// eviction manager reads the file system there.
	imageFs, err := os.MkdirTemp("", "pleg-sim-images-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(imageFs) })
	n.sim = simtest.Start(t, sim.Options{
		Latency: model, Seed: 1, CgroupDriver: sim.CgroupDriverCgroupfs, ImageFsMountpoint: imageFs,
	})
	n.pleg = collect(t, n.sim)

	kubeletOpts.NodeName, kubeletOpts.Token, kubeletOpts.NodeIP = nodeName, nodeToken, nodeIP
	kubeletOpts.RuntimeEndpoint, kubeletOpts.CgroupRoot = n.sim.Endpoint(), cgroupRoot
	n.kubelet, err = n.server.StartKubelet(ctx, bin, kubeletOpts)
	if err != nil {
		unavailable(t, err)
	}
	// Registered before the simulator's cleanup, so run before it: the
	// kubelet stops while its runtime still answers.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubelet log tail:\n%s", n.kubelet.LogTail(60))
		}
		if err := n.kubelet.Stop(); err != nil {
			t.Error(err)
		}
		// The simulator puts no process in the pods' cgroups: they go
		// with the kubelet.
		if err := n.kubelet.RemoveCgroups(); err != nil {
			t.Error(err)
		}
	})
	if n.cs, err = n.server.Client(); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.WaitFor(ctx, "node "+nodeName+" Ready", func() (bool, error) {
		nd, err := n.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Errorf("Ready %s: %s", c.Status, c.Message)
			}
		}
		return false, nil
	}); err != nil {
		unavailable(t, fmt.Errorf("%w\nkubelet log tail:\n%s", err, n.kubelet.LogTail(40)))
	}
	return n
}

// collector runs pleg's generator on the simulator, relisting every
// second as the kubelet does, and keeps every event it delivers.
type collector struct {
	gen *pleg.Generator
	// registry holds the generator's metrics.
	registry *prometheus.Registry
	mu       sync.Mutex
	events   []pleg.Event
}

func collect(t testing.TB, s *sim.Sim) *collector {
	t.Helper()
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	g, err := pleg.New(rt, pleg.Options{
		Mode: pleg.ModeGeneric, RelistPeriod: time.Second,
		Cache: podcache.New(), Logger: slog.New(slog.DiscardHandler), Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{gen: g, registry: reg}
	sub := g.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		}
	}()
	g.Start()
	t.Cleanup(func() {
		g.Stop()
		cancel()
		<-done
		sub.Close()
		rt.Close()
	})
	return c
}

func (c *collector) snapshot() []pleg.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pleg.Event(nil), c.events...)
}

// workPod is a pod bound to the node: one container, no service account
// token (no controller publishes the namespace's CA here).
func workPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%04d", i), Namespace: work, Labels: map[string]string{"app": "simwork"}},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
}

// createPods makes the namespace, its default service account (which
// admission wants of every pod; no controller makes it here) and n pods
// bound to the node.
func (n *node) createPods(t testing.TB, ctx context.Context, count int) {
	t.Helper()
	if _, err := n.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: work}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := n.cs.CoreV1().ServiceAccounts(work).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for i := range count {
		if _, err := n.cs.CoreV1().Pods(work).Create(ctx, workPod(i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// running counts the work pods in phase Running, and returns the UIDs
// of all of them by namespace/name.
func (n *node) running(ctx context.Context) (int, map[string]string, error) {
	pods, err := n.cs.CoreV1().Pods(work).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, err
	}
	uids := map[string]string{}
	running := 0
	for _, p := range pods.Items {
		uids[string(p.UID)] = p.Namespace + "/" + p.Name
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	return running, uids, nil
}

// TestKubeletOnSim runs 100 pods on a real kubelet over the simulator,
// deletes one, and checks that the kubelet's PLEG and pleg's saw the
// same Started and Died events of them.
func TestKubeletOnSim(t *testing.T) {
	const pods = 100
	n := startNode(t, sim.LatencySeedNode, kubetest.KubeletOptions{Verbosity: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	start := time.Now()
	n.createPods(t, ctx, pods)
	var uids map[string]string
	if err := kubetest.WaitFor(ctx, fmt.Sprintf("%d pods Running", pods), func() (bool, error) {
		running, u, err := n.running(ctx)
		if err != nil {
			return false, err
		}
		uids = u
		return running == pods, fmt.Errorf("%d of %d Running", running, pods)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pods Running %v after their creation", pods, time.Since(start).Round(100*time.Millisecond))
	if got := len(uids); got != pods {
		t.Fatalf("%d pods in %s, want %d", got, work, pods)
	}

	// A pod deleted goes away: the kubelet stops its container and
	// sandbox, and the API server forgets it.
	doomed, err := n.cs.CoreV1().Pods(work).Get(ctx, workPod(0).Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cs.CoreV1().Pods(work).Delete(ctx, doomed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.WaitFor(ctx, "the deleted pod to go", func() (bool, error) {
		_, err := n.cs.CoreV1().Pods(work).Get(ctx, doomed.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}); err != nil {
		t.Fatal(err)
	}

	// The two PLEGs' events of the work pods, Started and Died: the
	// kubelet's from its log, pleg's from its subscription.
	var onlyKubelet, onlyPleg, twice []kubetest.PLEGKey
	var kubeletN, plegN int
	died := 0
	if err := kubetest.WaitFor(ctx, "pleg's events to be the kubelet's", func() (bool, error) {
		k, misnamed, err := n.kubelet.PLEGEventsOf(uids)
		if err != nil {
			return false, err
		}
		for _, m := range misnamed {
			t.Error(m)
		}
		var p []kubetest.PLEGKey
		died = 0
		for _, ev := range n.pleg.snapshot() {
			if _, ok := uids[ev.PodUID]; ok && (ev.Type == pleg.ContainerStarted || ev.Type == pleg.ContainerDied) {
				p = append(p, kubetest.PLEGKey{PodUID: ev.PodUID, Type: string(ev.Type), ID: ev.ContainerID})
				if ev.Type == pleg.ContainerDied && ev.PodUID == string(doomed.UID) {
					died++
				}
			}
		}
		kubeletN, plegN = len(k), len(p)
		onlyKubelet, onlyPleg, twice = kubetest.ComparePLEG(k, p)
		// Both of the deleted pod's: its container and its sandbox died.
		return died == 2 && len(onlyKubelet) == 0 && len(onlyPleg) == 0 && len(twice) == 0, nil
	}); err != nil {
		t.Fatalf("%v\ndeleted pod's Died events: %d, want 2\nonly the kubelet: %v\nonly pleg: %v\ntwice: %v",
			err, died, onlyKubelet, onlyPleg, twice)
	}
	// Each pod's sandbox and container started: 2 per pod, and the
	// deleted pod's 2 deaths.
	if want := 2*pods + 2; plegN != want {
		t.Errorf("pleg delivered %d Started and Died events of the work pods, want %d", plegN, want)
	}
	t.Logf("pleg's %d Started and Died events are the kubelet's %d", plegN, kubeletN)

	// Whatever the kubelet asked of its runtime, the simulator served.
	log, err := n.kubelet.Log()
	if err != nil {
		t.Fatal(err)
	}
	if calls := unimplemented(log); len(calls) > 0 {
		t.Errorf("the kubelet called CRI methods the simulator does not serve: %v", calls)
	}
}

// unimplemented returns the CRI methods a kubelet's log says its runtime
// answered Unimplemented, with how often.
func unimplemented(log []byte) map[string]int {
	out := map[string]int{}
	for line := range strings.Lines(string(log)) {
		if m := unimplementedLine.FindStringSubmatch(line); m != nil {
			out[m[1]]++
		}
	}
	return out
}

var unimplementedLine = regexp.MustCompile(`code = Unimplemented desc = (?:unknown )?method (\w+)`)
