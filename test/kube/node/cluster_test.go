// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// The node's names and addresses. The pod network is a bridge of this
// machine with pods in network namespaces the runtime makes: nothing
// leaves the machine.
const (
	nodeName = "pleg-node"
	gateway  = "10.244.0.1"
)

// cluster is a single-node Kubernetes cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and a kubelet on containerd 2.x
// with a pod network (kubetest.StartCluster), and what the steps share.
type cluster struct {
	*kubetest.Cluster
	server     *kubetest.Server
	runtime    *runtimetest.Instance
	kubelet    *kubetest.Kubelet
	bin        kubetest.NodeBinaries
	cs         kubernetes.Interface
	kubeconfig string // an admin's, for kubectl and helm
	started    time.Time
	// uids names the workload's pods by UID, namespace/name, the deleted
	// ones too.
	uids map[string]string
}

// startCluster starts the cluster, waits until its node is Ready, and
// stops it when the test ends.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, nil)
}

// startClusterWith is startCluster with the kubelet's options changed by
// kubelet (a benchmark's feature gates), when not nil.
func startClusterWith(t testing.TB, kubelet func(*kubetest.KubeletOptions)) *cluster {
	t.Helper()
	kc := kubetest.StartCluster(t, kubetest.ClusterOptions{
		Network:      "10.244",
		BridgePrefix: "plegbr",
		Nodes:        []kubetest.NodeOptions{{Name: nodeName, Kubelet: kubelet}},
	})
	n := kc.Nodes[0]
	return &cluster{
		Cluster: kc,
		server:  kc.Server, runtime: n.Runtime, kubelet: n.Kubelet, bin: kc.Bin,
		cs: kc.CS, kubeconfig: kc.Kubeconfig, started: kc.Started,
		uids: map[string]string{},
	}
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	return kubetest.Condition(n, t)
}

func conditionsOf(n *corev1.Node) []string { return kubetest.ConditionsOf(n) }

// run runs a command as a person would type it, with the cluster's admin
// kubeconfig, and returns its standard output; a failure ends the test.
func (c *cluster) run(t *testing.T, ctx context.Context, name string, args ...string) string {
	t.Helper()
	out, err := c.tryRun(ctx, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

func (c *cluster) tryRun(ctx context.Context, name string, args ...string) (string, error) {
	return c.Run(ctx, name, args...)
}

// repoRoot is the repository's root, from this package's directory.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "..")
}
