// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plegkit/pleg/internal/testing/cachelock"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// The node's names and addresses. The pod network is a bridge of this
// machine with pods in network namespaces the runtime makes: nothing
// leaves the machine.
const (
	nodeName    = "pleg-node"
	nodeToken   = "pleg-test-node-token"
	bridgeName  = "plegbr0"
	gatewayCIDR = "10.244.0.1/24"
	gateway     = "10.244.0.1"
	// serviceIP is the kubernetes Service's cluster IP, the first address
	// of kube-apiserver's --service-cluster-ip-range (kubetest's), which
	// in-cluster clients dial.
	serviceIP = "10.96.0.1"
)

// podNetwork is the CNI network of the node: the standard bridge and
// host-local plugins, as a kubeadm node with a simple CNI has.
const podNetwork = `{
  "cniVersion": "1.0.0",
  "name": "pleg-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + bridgeName + `",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "10.244.0.0/24", "gateway": "` + gateway + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`

// cluster is a single-node Kubernetes cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and a kubelet on containerd 2.x
// with a pod network.
type cluster struct {
	server     *kubetest.Server
	runtime    *runtimetest.Instance
	kubelet    *kubetest.Kubelet
	bin        kubetest.NodeBinaries
	cs         kubernetes.Interface
	kubeconfig string // an admin's, for kubectl and helm
	helm       string
	started    time.Time
	// uids names the workload's pods by UID, namespace/name, the deleted
	// ones too.
	uids map[string]string
}

// unavailable ends the test because the cluster could not start: a
// failure under CI=true, a skip otherwise.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if kubetest.InCI() {
		t.Fatalf("a real node is required under CI=true but could not start: %v", err)
	}
	t.Skipf("skipping, no real node (set CI=true to make this a failure): %v", err)
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
	if os.Geteuid() != 0 {
		unavailable(t, errors.New("a kubelet needs root"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	logf := func(f string, a ...any) { t.Logf(f, a...) }
	c := &cluster{started: time.Now(), uids: map[string]string{}}

	bin, err := kubetest.BuildNode(ctx, logf)
	if err != nil {
		unavailable(t, err)
	}
	c.bin = bin
	if c.helm, err = buildHelm(ctx, logf); err != nil {
		unavailable(t, err)
	}
	iptables, err := runtimetest.HostBinary(ctx, "iptables", "iptables", logf)
	if err != nil {
		unavailable(t, err)
	}

	delBridge, err := kubetest.Bridge(bridgeName, gatewayCIDR)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := delBridge(); err != nil {
			t.Error(err)
		}
	})
	c.server, err = kubetest.StartWith(ctx, logf, kubetest.Options{
		Address: gateway,
		SANs:    []net.IP{net.ParseIP(serviceIP)},
		Tokens:  []kubetest.Token{{Token: nodeToken, User: "system:node:" + nodeName, Groups: []string{"system:nodes"}}},
		Nodes:   true,
	})
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log tail:\n%s", c.server.LogTail(20))
		}
		if err := c.server.Stop(); err != nil {
			t.Error(err)
		}
	})
	// What kube-proxy does for the kubernetes Service, which is all a pod
	// here dials: its cluster IP to the API server. Marked, so that the
	// rules of a run that died are found and removed.
	if err := removeDNAT(iptables); err != nil {
		unavailable(t, err)
	}
	dnat := []string{"-t", "nat", "-I", "PREROUTING", "-d", serviceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", dnatComment,
		"-j", "DNAT", "--to-destination", net.JoinHostPort(gateway, strconv.Itoa(c.server.Port()))}
	if out, err := exec.Command(iptables, dnat...).CombinedOutput(); err != nil {
		unavailable(t, fmt.Errorf("iptables: %w: %s", err, out))
	}
	t.Cleanup(func() {
		if err := removeDNAT(iptables); err != nil {
			t.Error(err)
		}
	})

	if err := c.server.StartControllers(ctx, bin); err != nil {
		unavailable(t, err)
	}
	versions := runtimetest.DefaultContainerdVersions
	spec := runtimetest.Spec{Kind: runtimetest.Containerd, Version: versions[len(versions)-1]}
	// Last of all, once the runtime has removed the pods: their cgroups.
	t.Cleanup(func() {
		if c.kubelet == nil {
			return
		}
		if err := c.kubelet.RemoveCgroups(); err != nil {
			t.Error(err)
		}
	})
	c.runtime, err = runtimetest.Start(ctx, spec, runtimetest.Options{Logf: logf, PodNetwork: podNetwork, KeepLogs: true})
	if err != nil {
		unavailable(t, err)
	}
	// Last in, first out: the kubelet stops before its runtime, which
	// then removes the pods, before the API server stops.
	t.Cleanup(func() {
		if err := c.runtime.Stop(); err != nil {
			t.Error(err)
		}
	})
	kopts := kubetest.KubeletOptions{
		NodeName: nodeName, Token: nodeToken, NodeIP: gateway,
		RuntimeEndpoint: c.runtime.Endpoint, Verbosity: 2,
	}
	if kubelet != nil {
		kubelet(&kopts)
	}
	c.kubelet, err = c.server.StartKubelet(ctx, bin, kopts)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubelet log tail:\n%s", c.kubelet.LogTail(40))
		}
		if err := c.kubelet.Stop(); err != nil {
			t.Error(err)
		}
	})
	if c.cs, err = c.server.Client(); err != nil {
		t.Fatal(err)
	}
	if c.kubeconfig, err = c.server.WriteKubeconfig("admin", kubetest.AdminToken); err != nil {
		t.Fatal(err)
	}
	if err := c.waitNode(ctx, "Ready", func(n *corev1.Node) bool {
		return conditionStatus(n, corev1.NodeReady) == corev1.ConditionTrue && !notReadyTaint(n)
	}); err != nil {
		unavailable(t, fmt.Errorf("%w\nkubelet log tail:\n%s", err, c.kubelet.LogTail(30)))
	}
	t.Logf("node %s Ready %v after the start", nodeName, time.Since(c.started).Round(time.Second))
	return c
}

// dnatComment marks the test's NAT rules.
const dnatComment = "pleg-test-node"

// removeDNAT deletes every NAT rule marked dnatComment.
func removeDNAT(iptables string) error {
	out, err := exec.Command(iptables, "-t", "nat", "-S", "PREROUTING").Output()
	if err != nil {
		return fmt.Errorf("iptables -S: %w", err)
	}
	for _, rule := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(rule, "-A ") || !strings.Contains(rule, dnatComment) {
			continue
		}
		args := append([]string{"-t", "nat", "-D"}, strings.Fields(strings.TrimPrefix(rule, "-A "))...)
		if out, err := exec.Command(iptables, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// waitNode waits until the node satisfies cond.
func (c *cluster) waitNode(ctx context.Context, what string, cond func(*corev1.Node) bool) error {
	var last error
	for {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil && cond(n) {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("conditions %v, taints %v", conditionsOf(n), n.Spec.Taints)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not %s: %w (last: %w)", nodeName, what, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func conditionStatus(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func conditionsOf(n *corev1.Node) []string {
	var out []string
	for _, c := range n.Status.Conditions {
		out = append(out, string(c.Type)+"="+string(c.Status)+"("+c.Reason+")")
	}
	return out
}

func notReadyTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	})
}

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
	path := name
	switch name {
	case "kubectl":
		path = c.bin.Kubectl
	case "helm":
		path = c.helm
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "HELM_CACHE_HOME="+filepath.Join(c.server.Dir(), "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.server.Dir(), "helm-config"), "HELM_DATA_HOME="+filepath.Join(c.server.Dir(), "helm-data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// buildHelm builds the helm command of test/chart's go.mod (its tool)
// into the cache beside the Kubernetes binaries: the chart is installed
// as an operator installs it.
func buildHelm(ctx context.Context, logf func(string, ...any)) (string, error) {
	cache, err := runtimetest.CacheDir()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(cache, "kube", "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	unlock, err := cachelock.Acquire(filepath.Join(binDir, "..", "helm.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	out := filepath.Join(binDir, "helm")
	if _, err := os.Stat(out); err != nil {
		logf("building helm from test/chart's go.mod (minutes, the first time)")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "helm.sh/helm/v4/cmd/helm")
	cmd.Dir = filepath.Join(repoRoot(), "test", "chart")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build helm in test/chart: %w\n%s", err, output)
	}
	return out, nil
}

// repoRoot is the repository's root, from this package's directory.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "..")
}
