// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubetest

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
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plegkit/pleg/internal/testing/helmbin"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// ServiceIP is the kubernetes Service's cluster IP, the first address of
// kube-apiserver's --service-cluster-ip-range, which in-cluster clients
// dial: each cluster sends it, from its own pod network, to its own API
// server.
const ServiceIP = "10.96.0.1"

// ClusterOptions describe a cluster on this machine: one API server and
// its controllers, and nodes, each a kubelet on a private runtime with a
// pod network of its own (a Linux bridge and the standard CNI plugins).
// Two clusters may run at once when their Network and BridgePrefix
// differ.
type ClusterOptions struct {
	// Network is the first two octets of the clusters' pod networks
	// ("10.244"): node i has 10.244.i.0/24, with the gateway .1 on the
	// bridge BridgePrefix+i. The API server serves on node 0's gateway.
	Network string
	// BridgePrefix names the nodes' bridges (at most 12 characters).
	BridgePrefix string
	// Nodes are the cluster's nodes; at least one.
	Nodes []NodeOptions
	// Logf receives progress (t.Logf when nil).
	Logf func(string, ...any)
}

// NodeOptions describe one node.
type NodeOptions struct {
	// Name is the node's name.
	Name string
	// Runtime is the node's runtime; default the newest containerd of
	// the harness.
	Runtime runtimetest.Spec
	// Kubelet, when not nil, changes the kubelet's options.
	Kubelet func(*KubeletOptions)
	// CNIBinDir, if set, is where the node's runtime runs its CNI
	// plugins from instead of the host's directory: a test's wrappers.
	CNIBinDir string
}

// Cluster is a running cluster. Stop it with the test: StartCluster
// registers its cleanup.
type Cluster struct {
	Server *Server
	Bin    NodeBinaries
	// Helm is helm built from test/chart's go.mod.
	Helm string
	// CS is an admin's client; Kubeconfig an admin's kubeconfig, for
	// kubectl and helm.
	CS         kubernetes.Interface
	Kubeconfig string
	Nodes      []*ClusterNode
	// Started is when StartCluster began.
	Started time.Time
}

// ClusterNode is one node of a cluster.
type ClusterNode struct {
	Name string
	// Gateway is the node's address: its pod network's gateway, where
	// its kubelet serves.
	Gateway string
	// Subnet is its pod network, e.g. 10.244.0.0/24.
	Subnet  string
	Bridge  string
	Runtime *runtimetest.Instance
	Kubelet *Kubelet
}

// token is the node's bearer token: the API server authenticates it as
// the node (system:node:NAME) for the Node authorizer.
func (n *ClusterNode) token() string { return "pleg-test-node-token-" + n.Name }

// podNetwork is the node's CNI network: the standard bridge and
// host-local plugins, as a kubeadm node with a simple CNI has.
func (n *ClusterNode) podNetwork() string {
	return `{
  "cniVersion": "1.0.0",
  "name": "` + n.Name + `",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + n.Bridge + `",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + n.Subnet + `", "gateway": "` + n.Gateway + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`
}

// NodeUnavailable ends the test because a cluster could not start: a
// failure under CI=true, a skip otherwise.
func NodeUnavailable(t testing.TB, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("a real node is required under CI=true but could not start: %v", err)
	}
	t.Skipf("skipping, no real node (set CI=true to make this a failure): %v", err)
}

// StartCluster starts a cluster, waits until every node is Ready, and
// stops it when the test ends, leaving no process, bridge, NAT rule,
// mount or cgroup behind. What it cannot start ends the test through
// NodeUnavailable.
//
//nolint:funlen // one start in order (servers, nodes, cleanup, readiness); to be split into named steps
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		NodeUnavailable(t, errors.New("a kubelet needs root"))
	}
	if len(opts.Nodes) == 0 || opts.Network == "" || opts.BridgePrefix == "" {
		t.Fatalf("kubetest: a cluster needs a network, a bridge prefix and nodes: %+v", opts)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(f string, a ...any) { t.Logf(f, a...) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := &Cluster{Started: time.Now()}
	for i, no := range opts.Nodes {
		n := &ClusterNode{
			Name:    no.Name,
			Bridge:  opts.BridgePrefix + strconv.Itoa(i),
			Gateway: opts.Network + "." + strconv.Itoa(i) + ".1",
			Subnet:  opts.Network + "." + strconv.Itoa(i) + ".0/24",
		}
		c.Nodes = append(c.Nodes, n)
	}

	var err error
	if c.Bin, err = BuildNode(ctx, logf); err != nil {
		NodeUnavailable(t, err)
	}
	if c.Helm, err = BuildHelm(ctx, logf); err != nil {
		NodeUnavailable(t, err)
	}
	// Another run's cluster on the same network (make test in a second
	// checkout of this machine) would share its bridges and NAT rules:
	// wait for it to end. Registered before the cluster's own cleanup,
	// the lock is released after it.
	release, err := lockNetwork(opts.Network, logf)
	if err != nil {
		NodeUnavailable(t, err)
	}
	t.Cleanup(release)
	iptables, err := runtimetest.HostBinary(ctx, "iptables", "iptables", logf)
	if err != nil {
		NodeUnavailable(t, err)
	}
	for _, n := range c.Nodes {
		del, err := Bridge(n.Bridge, n.Gateway+"/24")
		if err != nil {
			NodeUnavailable(t, err)
		}
		t.Cleanup(func() {
			if err := del(); err != nil {
				t.Error(err)
			}
		})
	}
	var tokens []Token
	for _, n := range c.Nodes {
		tokens = append(tokens, Token{Token: n.token(), User: "system:node:" + n.Name, Groups: []string{"system:nodes"}})
	}
	c.Server, err = StartWith(ctx, logf, Options{
		Address: c.Nodes[0].Gateway,
		SANs:    []net.IP{net.ParseIP(ServiceIP)},
		Tokens:  tokens,
		Nodes:   true,
	})
	if err != nil {
		NodeUnavailable(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log tail:\n%s", c.Server.LogTail(20))
		}
		if err := c.Server.Stop(); err != nil {
			t.Error(err)
		}
	})
	// What kube-proxy does for the kubernetes Service, which is all a pod
	// here dials: its cluster IP, from this cluster's pod networks, to
	// this cluster's API server. Marked, so that the rules of a run that
	// died are found and removed, and another cluster's are left alone.
	comment := "pleg-test-cluster-" + opts.BridgePrefix
	if err := removeDNAT(iptables, comment); err != nil {
		NodeUnavailable(t, err)
	}
	dnat := []string{"-t", "nat", "-I", "PREROUTING", "-s", opts.Network + ".0.0/16",
		"-d", ServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", comment,
		"-j", "DNAT", "--to-destination", net.JoinHostPort(c.Nodes[0].Gateway, strconv.Itoa(c.Server.Port()))}
	if out, err := exec.Command(iptables, dnat...).CombinedOutput(); err != nil {
		NodeUnavailable(t, fmt.Errorf("iptables: %w: %s", err, out))
	}
	t.Cleanup(func() {
		if err := removeDNAT(iptables, comment); err != nil {
			t.Error(err)
		}
	})
	if err := c.Server.StartControllers(ctx, c.Bin); err != nil {
		NodeUnavailable(t, err)
	}

	// The runtimes start together: each builds or finds its binaries and
	// imports the test image.
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		spec := opts.Nodes[i].Runtime
		if spec.Kind == "" {
			versions := runtimetest.DefaultContainerdVersions
			spec = runtimetest.Spec{Kind: runtimetest.Containerd, Version: versions[len(versions)-1]}
		}
		wg.Go(func() {
			n.Runtime, errs[i] = runtimetest.Start(ctx, spec, runtimetest.Options{
				Logf: logf, PodNetwork: n.podNetwork(), CNIBinDir: opts.Nodes[i].CNIBinDir, KeepLogs: true,
			})
		})
	}
	wg.Wait()
	for _, n := range c.Nodes {
		// Last of all, once the runtime has removed the pods: their
		// cgroups. Cleanups run last in, first out.
		t.Cleanup(func() {
			if n.Kubelet == nil {
				return
			}
			if err := n.Kubelet.RemoveCgroups(); err != nil {
				t.Error(err)
			}
		})
		if n.Runtime == nil {
			continue
		}
		t.Cleanup(func() {
			if err := n.Runtime.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if err := errors.Join(errs...); err != nil {
		NodeUnavailable(t, err)
	}
	for i, n := range c.Nodes {
		kopts := KubeletOptions{
			NodeName: n.Name, Token: n.token(), NodeIP: n.Gateway,
			RuntimeEndpoint: n.Runtime.Endpoint, Verbosity: 2,
		}
		if f := opts.Nodes[i].Kubelet; f != nil {
			f(&kopts)
		}
		if n.Kubelet, err = c.Server.StartKubelet(ctx, c.Bin, kopts); err != nil {
			NodeUnavailable(t, err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("kubelet %s log tail:\n%s", n.Name, n.Kubelet.LogTail(40))
			}
			if err := n.Kubelet.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if c.CS, err = c.Server.Client(); err != nil {
		t.Fatal(err)
	}
	if c.Kubeconfig, err = c.Server.WriteKubeconfig("admin", AdminToken); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := c.WaitNode(ctx, n.Name, "Ready", func(node *corev1.Node) bool {
			return ConditionStatus(node, corev1.NodeReady) == corev1.ConditionTrue && !NotReadyTaint(node)
		}); err != nil {
			NodeUnavailable(t, fmt.Errorf("%w\nkubelet log tail:\n%s", err, n.Kubelet.LogTail(30)))
		}
		logf("node %s Ready %v after the start", n.Name, time.Since(c.Started).Round(time.Second))
	}
	return c
}

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *ClusterNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// removeDNAT deletes every NAT rule marked comment.
func removeDNAT(iptables, comment string) error {
	out, err := exec.Command(iptables, "-t", "nat", "-S", "PREROUTING").Output()
	if err != nil {
		return fmt.Errorf("iptables -S: %w", err)
	}
	for _, rule := range strings.Split(string(out), "\n") {
		f := strings.Fields(strings.TrimPrefix(rule, "-A "))
		if !strings.HasPrefix(rule, "-A ") || !slices.Contains(f, comment) {
			continue
		}
		args := append([]string{"-t", "nat", "-D"}, f...)
		if out, err := exec.Command(iptables, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// WaitNode waits until the node satisfies cond.
func (c *Cluster) WaitNode(ctx context.Context, name, what string, cond func(*corev1.Node) bool) error {
	var last error
	for {
		n, err := c.CS.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && cond(n) {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("conditions %v, taints %v", ConditionsOf(n), n.Spec.Taints)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not %s: %w (last: %w)", name, what, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Run runs a command as a person would type it, with the cluster's admin
// kubeconfig, and returns its standard output: kubectl and helm are the
// cluster's own.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	path := name
	switch name {
	case "kubectl":
		path = c.Bin.Kubectl
	case "helm":
		path = c.Helm
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(c.Server.Dir(), "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.Server.Dir(), "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(c.Server.Dir(), "helm-data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// ConditionStatus is the status of the node's condition t, or "".
func ConditionStatus(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	if c := Condition(n, t); c != nil {
		return c.Status
	}
	return ""
}

// Condition is the node's condition t, or nil.
func Condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// ConditionsOf lists the node's conditions as Type=Status(Reason).
func ConditionsOf(n *corev1.Node) []string {
	var out []string
	for _, c := range n.Status.Conditions {
		out = append(out, string(c.Type)+"="+string(c.Status)+"("+c.Reason+")")
	}
	return out
}

// NotReadyTaint tells the node carries the node controller's not-ready or
// unreachable taint.
func NotReadyTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	})
}

// BuildHelm builds the helm command of test/chart's go.mod (its tool)
// into the cache beside the Kubernetes binaries (internal/testing/helmbin,
// which test/chart's doc commands share): charts are installed as an
// operator installs them.
func BuildHelm(ctx context.Context, logf func(string, ...any)) (string, error) {
	mod, err := moduleDir()
	if err != nil {
		return "", err
	}
	return helmbin.Build(ctx, filepath.Join(mod, "..", "chart"), logf)
}

// RepoRoot is the repository's root: two levels above this module.
func RepoRoot() (string, error) {
	mod, err := moduleDir()
	if err != nil {
		return "", err
	}
	return filepath.Clean(filepath.Join(mod, "..", "..")), nil
}

// lockNetwork takes the machine's lock on a cluster network, waiting,
// with a line, while another process holds it. The lock is the process's:
// a run that is killed releases it.
func lockNetwork(network string, logf func(string, ...any)) (func(), error) {
	path := filepath.Join(os.TempDir(), "pleg-kubetest-"+network+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the network's lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		logf("network %s.0.0/16 is another test run's (%s): waiting for it to end", network, path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			_ = f.Close() // the lock failed: that error is the one to tell
			return nil, fmt.Errorf("the network's lock %s: %w", path, err)
		}
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}
