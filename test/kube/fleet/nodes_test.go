// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plegkit/pleg/internal/testing/promtest"
)

// fleetLabel marks the Node objects of one fleet, by its size.
const fleetLabel = "pleg.dev/fleet"

// node is one simulated node: its runtime, its pleg daemon, and the Node
// object they report on.
type node struct {
	name    string
	dir     string
	sim     *process
	pleg    *process
	metrics string // the daemon's --metrics-listen address
}

// fleet is the nodes of one run.
type fleet struct {
	size  int
	mode  string
	nodes []*node
}

// fleetOptions say how each node's pleg runs.
type fleetOptions struct {
	size       int
	mode       string        // pleg run --mode
	relist     time.Duration // pleg run --relist-period
	kubeconfig string
	bin        string
	prom       promtest.Binaries
	scrape     scrapeSettings
}

// runtimeTimeout is each runtime call's deadline (pleg run --timeout): a
// hung list fails after it, and the node's condition turns on a grace
// period (10 s) later. The default, 2 minutes, would make the incident
// wait on the relist threshold.
const runtimeTimeout = 10 * time.Second

// startFleet registers the nodes, starts a simulated runtime for each,
// then a pleg daemon for each, and returns once every daemon serves. At
// the test's end it stops them all.
func startFleet(t *testing.T, cs kubernetes.Interface, opts fleetOptions) *fleet {
	t.Helper()
	f := &fleet{size: opts.size, mode: opts.mode}
	root := t.TempDir()
	for i := range opts.size {
		n := &node{name: fmt.Sprintf("fleet-%d-%03d", opts.size, i), dir: filepath.Join(root, strconv.Itoa(i))}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f.nodes = append(f.nodes, n)
	}
	registerNodes(t, cs, f)
	t.Cleanup(func() { f.stop(t) })

	// The runtimes first: pleg's first relist waits for nothing.
	for i, n := range f.nodes {
		p, err := startProcess(n.name+" sim", opts.bin, "sim", "--socket", n.socket(), "--seed", strconv.Itoa(i+1),
			"--log-format", "json")
		if err != nil {
			t.Fatal(err)
		}
		n.sim = p
	}
	for _, n := range f.nodes {
		waitSocket(t, n)
	}
	for _, n := range f.nodes {
		p, err := startProcess(n.name+" pleg", opts.bin, "run",
			"-r", "unix://"+n.socket(),
			"--listen", "unix://"+filepath.Join(n.dir, "pleg.sock"),
			"--metrics-listen", "127.0.0.1:0",
			"--kubeconfig", opts.kubeconfig, "--node-name", n.name,
			"--mode", opts.mode, "--relist-period", opts.relist.String(), "--timeout", runtimeTimeout.String(),
			// Its own journal, as on a node of its own.
			"--state-dir", filepath.Join(n.dir, "state"),
			"--log-format", "json")
		if err != nil {
			t.Fatal(err)
		}
		n.pleg = p
	}
	for _, n := range f.nodes {
		select {
		case n.metrics = <-n.pleg.serving:
		case <-n.pleg.done:
			t.Fatalf("%s exited: %v\n%s", n.pleg.name, n.pleg.err, n.pleg.logTail())
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s is not serving after 2 minutes:\n%s", n.pleg.name, n.pleg.logTail())
		}
	}
	return f
}

func (n *node) socket() string { return filepath.Join(n.dir, "cri.sock") }

// waitSocket waits until the node's runtime serves its socket.
func waitSocket(t *testing.T, n *node) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(n.socket()); err == nil {
			return
		}
		if n.sim.exited() || time.Now().After(deadline) {
			t.Fatalf("%s: no socket: exited %v (%v)\n%s", n.sim.name, n.sim.exited(), n.sim.err, n.sim.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// registerNodes creates the fleet's Node objects as kubelets register
// them, Ready, and deletes them at the test's end.
func registerNodes(t *testing.T, cs kubernetes.Interface, f *fleet) {
	t.Helper()
	ctx := context.Background()
	for _, n := range f.nodes {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{fleetLabel: strconv.Itoa(f.size)}}}
		created, err := cs.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		created.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range f.nodes {
			err := cs.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		}
	})
}

// signalRuntimes sends sig to every node's runtime, as close together as
// a loop of kill(2) can: SIGSTOP freezes them all, as a runtime upgrade
// that hangs would, with every call in flight left unanswered; SIGCONT
// lets them all answer at once.
func (f *fleet) signalRuntimes(sig syscall.Signal) error {
	var errs []error
	for _, n := range f.nodes {
		errs = append(errs, n.sim.signal(sig))
	}
	return errors.Join(errs...)
}

// stopDaemons stops every pleg daemon at once, as deleting the DaemonSet
// would; each sets its condition to Unknown as it stops.
func (f *fleet) stopDaemons(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	for _, n := range f.nodes {
		wg.Go(func() {
			if err := n.pleg.stop(30 * time.Second); err != nil {
				t.Error(err)
			}
			if n.pleg.err != nil {
				t.Errorf("%s: %v\n%s", n.pleg.name, n.pleg.err, n.pleg.logTail())
			}
		})
	}
	wg.Wait()
}

// stop ends whatever still runs: daemons first, then their runtimes.
func (f *fleet) stop(t *testing.T) {
	var wg sync.WaitGroup
	for _, n := range f.nodes {
		wg.Go(func() {
			for _, p := range []*process{n.pleg, n.sim} {
				if p == nil {
					continue
				}
				if err := p.stop(30 * time.Second); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// usage sums the resources of the fleet's daemons, and of their
// runtimes apart.
func (f *fleet) usage(t *testing.T) (daemons, runtimes []usage) {
	t.Helper()
	for _, n := range f.nodes {
		d, err := n.pleg.usage()
		if err != nil {
			t.Fatalf("%s: %v", n.pleg.name, err)
		}
		r, err := n.sim.usage()
		if err != nil {
			t.Fatalf("%s: %v", n.sim.name, err)
		}
		daemons, runtimes = append(daemons, d), append(runtimes, r)
	}
	return daemons, runtimes
}
