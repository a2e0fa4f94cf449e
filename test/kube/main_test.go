// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kube tests pleg's reporting into a real Kubernetes API server:
// the daemon over the simulated runtime, reporting to kube-apiserver and
// etcd started by kubetest, read back with client-go as kubectl reads them.
// It is a module of its own so that the product's module does not require
// k8s.io/kubernetes and etcd.
package kube

import (
	"context"
	"fmt"
	"hash/fnv"
	"log"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// The API server every test of the binary shares, or why there is none.
var (
	server    *kubetest.Server
	serverErr error
)

func TestMain(m *testing.M) {
	// Building kube-apiserver the first time takes minutes on 2 cores.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	l := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
	start := time.Now()
	server, serverErr = kubetest.Start(ctx, func(f string, a ...any) { _ = l.Output(2, fmt.Sprintf(f, a...)) })
	cancel()
	if serverErr == nil {
		l.Printf("kube-apiserver ready at %s in %v", server.URL(), time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// apiServer returns the shared API server and an admin's client, or ends
// the test as kubetest.Unavailable says.
func apiServer(t *testing.T) (*kubetest.Server, kubernetes.Interface) {
	t.Helper()
	if server == nil {
		kubetest.Unavailable(t, serverErr)
	}
	cs, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	// The simulator's pods live in namespace sim: their events need it.
	_, err = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sim"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log tail:\n%s", server.LogTail(30))
		}
	})
	return server, cs
}

// createNode registers a Node as a kubelet would, Ready.
func createNode(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// startSim serves a simulator of a few pods, steady and answering at
// once unless opts say otherwise.
func startSim(t *testing.T, opts sim.Options) *sim.Sim {
	t.Helper()
	if opts.Pods == 0 {
		opts.Pods, opts.Containers = 5, 2
	}
	// A seed of each test's own: pod UIDs differ between tests, so that
	// one test's events on a pod are not another's.
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	opts.Seed = h.Sum64()
	return simtest.Start(t, opts)
}

// runDaemon runs pleg's daemon over s, reporting on node with the
// credentials of kubeconfig, as `pleg run --kubeconfig` does, until the
// test ends.
func runDaemon(t *testing.T, s *sim.Sim, kubeconfig, node string, opts pleg.Options) *daemon.Daemon {
	t.Helper()
	d, _ := startDaemon(t, s, kubeconfig, node, opts)
	return d
}

// startDaemon is runDaemon that can also be stopped before the test
// ends; stop returns the daemon's error.
func startDaemon(t *testing.T, s *sim.Sim, kubeconfig, node string, opts pleg.Options) (d *daemon.Daemon, stop func() error) {
	t.Helper()
	// Each call's deadline is pleg run's (2 min): a hung status call ends
	// at the inspection's deadline (10 s by default), as in the field.
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), RequestTimeout: 2 * time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client, err := kubereport.NewClient(kubereport.ClientOptions{Kubeconfig: kubeconfig, UserAgent: "pleg-test"})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, err = daemon.New(daemon.Config{
		Runtime:   rt,
		Generator: opts,
		Listen:    "127.0.0.1:0",
		Logger:    logger,
		Kube:      &kubereport.Config{NodeName: node, Client: client},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var (
		once    sync.Once
		stopErr error
	)
	stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	return d, stop
}

// testWriter sends the daemon's log to the test's, shown on failure or
// with -v.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// condition is pleg's condition on node, or nil.
func condition(t *testing.T, cs kubernetes.Interface, node string) *corev1.NodeCondition {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == kubereport.ConditionType {
			return &c
		}
	}
	return nil
}

// waitCondition waits until pleg's condition on node has status and
// reason, and returns it; on a timeout it says what the condition was.
func waitCondition(t *testing.T, cs kubernetes.Interface, node string, status corev1.ConditionStatus, reason string, within time.Duration) (*corev1.NodeCondition, time.Duration) {
	t.Helper()
	var c *corev1.NodeCondition
	start := time.Now()
	for {
		c = condition(t, cs, node)
		if c != nil && c.Status == status && c.Reason == reason {
			return c, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for %s %s %s; the condition is %+v", within, kubereport.ConditionType, status, reason, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nodeEvents are the events `kubectl describe node` shows: those whose
// involved object is the Node, found by a UID equal to its name.
func nodeEvents(t *testing.T, cs kubernetes.Interface, node string) []corev1.Event {
	t.Helper()
	ref := &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
	list, err := cs.CoreV1().Events("").SearchWithContext(t.Context(), scheme.Scheme, ref)
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// podEvents are the events `kubectl describe pod` shows.
func podEvents(t *testing.T, cs kubernetes.Interface, namespace, name, uid string) []corev1.Event {
	t.Helper()
	ref := &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: name, UID: types.UID(uid)}
	list, err := cs.CoreV1().Events(namespace).SearchWithContext(t.Context(), scheme.Scheme, ref)
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func hasEvent(events []corev1.Event, kind, reason string) *corev1.Event {
	i := slices.IndexFunc(events, func(e corev1.Event) bool { return e.Type == kind && e.Reason == reason })
	if i < 0 {
		return nil
	}
	return &events[i]
}

// eventually polls f until it holds or the deadline passes; the deadline
// is a bound on progress, not a speed claim: a busy machine only makes it
// slower.
func eventually(t *testing.T, what string, within time.Duration, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}
