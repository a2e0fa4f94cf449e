// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// NodeBinaries are what a cluster adds to the API server: the controller
// manager, the scheduler, the kubelet, and kubectl for what a person types.
type NodeBinaries struct {
	ControllerManager, Scheduler, Kubelet, Kubectl string
}

// BuildNode builds the node's binaries from the module's k8s.io/kubernetes
// release, as Build builds the API server: the same program (cached,
// version stamped), under their names.
func BuildNode(ctx context.Context, logf func(string, ...any)) (NodeBinaries, error) {
	dir, err := buildKube(ctx, logf)
	if err != nil {
		return NodeBinaries{}, err
	}
	return NodeBinaries{
		ControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Scheduler:         filepath.Join(dir, "kube-scheduler"),
		Kubelet:           filepath.Join(dir, "kubelet"),
		Kubectl:           filepath.Join(dir, "kubectl"),
	}, nil
}

// StartControllers starts kube-controller-manager and kube-scheduler
// against s, as an admin, on loopback; Stop stops them with the server.
// Without them a DaemonSet, a Deployment or a Job makes no pod, and no
// pod is bound to a node.
func (s *Server) StartControllers(ctx context.Context, bin NodeBinaries) error {
	kubeconfig, err := s.WriteKubeconfig("controllers", AdminToken)
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	kcm, err := startProcess(filepath.Join(s.dir, "kube-controller-manager.log"), bin.ControllerManager,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]),
		// Publishes the CA every pod's token volume holds
		// (kube-root-ca.crt), and signs legacy tokens.
		"--root-ca-file="+s.caFile,
		"--service-account-private-key-file="+filepath.Join(s.dir, "sa.key"),
		"--use-service-account-credentials=false",
		"--v=1",
	)
	if err != nil {
		return err
	}
	s.addProcess(kcm)
	sched, err := startProcess(filepath.Join(s.dir, "kube-scheduler.log"), bin.Scheduler,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[1]),
		"--v=1",
	)
	if err != nil {
		return err
	}
	s.addProcess(sched)
	for _, c := range []struct {
		p    *process
		name string
		port int
	}{{kcm, "kube-controller-manager", ports[0]}, {sched, "kube-scheduler", ports[1]}} {
		healthz := "https://127.0.0.1:" + strconv.Itoa(c.port) + "/healthz"
		if err := waitFor(ctx, c.p, c.name, func() error { return httpsOK(healthz) }); err != nil {
			return err
		}
	}
	return nil
}

// httpsOK asks url, whose certificate is self-signed, for a 200.
func httpsOK(url string) error {
	c := http.Client{Timeout: 5 * time.Second, Transport: insecureTransport()}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	return nil
}

// KubeletOptions describe a kubelet and its node.
type KubeletOptions struct {
	// NodeName is the node's name; its token must be one of the server's
	// Options.Tokens, as system:node:NodeName in group system:nodes.
	NodeName, Token string
	// NodeIP is the node's address: the kubelet serves on it (the API
	// server dials it for exec and logs) and reports it as InternalIP.
	NodeIP string
	// RuntimeEndpoint is the CRI runtime's socket (unix://...).
	RuntimeEndpoint string
	// Verbosity is the kubelet's -v; at 2 it logs every PLEG event it
	// syncs a pod on ("SyncLoop (PLEG)").
	Verbosity int
	// CgroupRoot is the cgroup (e.g. "/plegsim") under which the kubelet
	// makes its kubepods hierarchy; empty: one named after its directory.
	// A kubelet kills the processes of pod cgroups it does not know, so
	// two on one machine must not share one. StartKubelet makes it in
	// every hierarchy; RemoveCgroups removes it.
	CgroupRoot string
	// ReadOnlyPort, when not 0, is the kubelet's read-only port on
	// NodeIP, plain HTTP without authentication: its /metrics for a
	// benchmark that reads them.
	ReadOnlyPort int
	// MaxPods is the kubelet's maxPods; 0 keeps its default, 110, past
	// which it refuses pods (OutOfpods).
	MaxPods int
	// FeatureGates are the kubelet's featureGates (e.g. EventedPLEG, an
	// alpha gate off by default); nil leaves the release's defaults.
	FeatureGates map[string]bool
}

// Kubelet is a running kubelet.
type Kubelet struct {
	dir, logPath string
	proc         *process
	// cgroupRoot is the kubelet's own cgroup root, in every hierarchy: a
	// kubelet kills the processes of pod cgroups it does not know, so two
	// on one machine (two tests) must not share one.
	cgroupRoot string
}

// StartKubelet starts a kubelet that registers opts.NodeName with s, in a
// directory of its own, and waits until it serves. Whether the node goes
// Ready is for the test to wait on: it takes the runtime's network.
//
// Its configuration is what this kind of machine needs: cgroup v1 with
// the cgroupfs driver (a kubelet from 1.35 refuses cgroup v1 unless
// told), swap tolerated, no local storage accounting (the root disk's
// statistics cannot be read here), and, as kubeadm sets it up, the API
// server's client certificate and bearer tokens the API server vouches
// for as its ways in, every request authorized by the API server.
func (s *Server) StartKubelet(ctx context.Context, bin NodeBinaries, opts KubeletOptions) (*Kubelet, error) {
	dir, err := os.MkdirTemp("", "pleg-kubelet-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	k := &Kubelet{dir: dir, logPath: filepath.Join(dir, "kubelet.log"), cgroupRoot: opts.CgroupRoot}
	if k.cgroupRoot == "" {
		k.cgroupRoot = "/" + filepath.Base(dir)
	}
	if err := makeCgroupRoot(k.cgroupRoot); err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	kubeconfig, err := s.WriteKubeconfig("kubelet-"+opts.NodeName, opts.Token)
	if err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	config := kubeletConfig(opts, ports, s.caFile, dir, k.cgroupRoot)
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	k.proc, err = startProcess(k.logPath, bin.Kubelet,
		"--config="+configPath,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(dir, "root"),
		"--cert-dir="+filepath.Join(dir, "pki"),
		"--hostname-override="+opts.NodeName,
		"--node-ip="+opts.NodeIP,
		"--v="+strconv.Itoa(opts.Verbosity),
	)
	if err != nil {
		return nil, errors.Join(err, k.cleanup())
	}
	healthz := "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/healthz"
	if err := waitFor(ctx, k.proc, "kubelet", func() error {
		resp, err := http.Get(healthz)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kubelet %s: %d", healthz, resp.StatusCode)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%w\nkubelet log:\n%s", errors.Join(err, k.Stop()), k.LogTail(30))
	}
	return k, nil
}

// kubeletConfig is the kubelet's configuration file: serving on the
// node's address at ports[0], its health at ports[1] on loopback, in dir.
func kubeletConfig(opts KubeletOptions, ports []int, caFile, dir, cgroupRoot string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: %[9]d
maxPods: %[10]d
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
# As kubeadm sets it: client certificates, and bearer tokens checked by
# the API server (TokenReview), each request authorized by it
# (SubjectAccessReview): a pod's service account reads /metrics with
# nodes/metrics, and nothing more.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true, cacheTTL: 10s}
  x509: {clientCAFile: %[4]q}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 10s, cacheUnauthorizedTTL: 10s}
containerRuntimeEndpoint: %[5]q
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
localStorageCapacityIsolation: false
# The root disk is the machine's: no eviction or image collection on
# its figures, whatever else runs there.
evictionHard: {memory.available: 100Mi}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# A status write every 10 s, changed or not, as before 1.13: the tests
# watch pleg's condition live beside the kubelet's own writes.
nodeStatusUpdateFrequency: 10s
nodeStatusReportFrequency: 10s
clusterDomain: cluster.local
cgroupRoot: %[8]q
staticPodPath: %[6]q
volumePluginDir: %[7]q
serializeImagePulls: false
`, opts.NodeIP, ports[0], ports[1], caFile, opts.RuntimeEndpoint,
		filepath.Join(dir, "manifests"), filepath.Join(dir, "volume-plugins"), cgroupRoot,
		opts.ReadOnlyPort, cmp.Or(opts.MaxPods, 110)) + featureGates(opts.FeatureGates)
}

// featureGates is the configuration's featureGates map, sorted, or
// nothing when there are none.
func featureGates(gates map[string]bool) string {
	if len(gates) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("featureGates:\n")
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		fmt.Fprintf(&b, "  %s: %t\n", name, gates[name])
	}
	return b.String()
}

// Log is the kubelet's log so far.
func (k *Kubelet) Log() ([]byte, error) { return os.ReadFile(k.logPath) }

// LogTail returns the last n lines of the kubelet's log.
func (k *Kubelet) LogTail(n int) string {
	data, _ := os.ReadFile(k.logPath)
	return tail(string(data), n)
}

// CgroupRoot is the kubelet's cgroup root (its cgroupRoot), in every
// hierarchy: its pods' cgroups are below.
func (k *Kubelet) CgroupRoot() string { return k.cgroupRoot }

// Pid is the kubelet's process ID.
func (k *Kubelet) Pid() int { return k.proc.cmd.Process.Pid }

// RootDir is the kubelet's --root-dir: its pods' volumes are below.
func (k *Kubelet) RootDir() string { return filepath.Join(k.dir, "root") }

// Stop stops the kubelet (SIGTERM), unmounts its pods' volumes and
// removes its directory. Its pods go on running in the runtime: stopping
// the runtime removes them, and then RemoveCgroups their cgroups.
func (k *Kubelet) Stop() error {
	var errs []error
	if k.proc != nil {
		errs = append(errs, k.proc.stop())
	}
	return errors.Join(append(errs, k.cleanup())...)
}

func (k *Kubelet) cleanup() error {
	if os.Getenv("PLEG_KEEP_KUBELET_LOG") != "" {
		if data, err := os.ReadFile(k.logPath); err == nil {
			_ = os.WriteFile(filepath.Join(os.TempDir(), filepath.Base(k.dir)+".log"), data, 0o644)
		}
	}
	return errors.Join(runtimetest.UnmountBelow(k.dir), os.RemoveAll(k.dir))
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (and the v2
// one beside them, on a hybrid host).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() { // cpu and cpuacct are links to cpu,cpuacct
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out, nil
}

// makeCgroupRoot makes the cgroup root in every hierarchy, as the kubelet
// wants it to exist; in cpuset's, with its parent's CPUs and memory nodes,
// which a new cpuset cgroup of v1 lacks.
func makeCgroupRoot(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("kubetest: cgroup root: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("kubetest: cgroup root: %w", err)
				}
			}
		}
	}
	return nil
}

// RemoveCgroups removes the kubelet's cgroup root and what it made below
// (its pods' cgroups), in every hierarchy, deepest first: call it once the
// kubelet has stopped and the runtime has removed its pods.
func (k *Kubelet) RemoveCgroups() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, k.cgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("kubetest: rmdir %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// Bridge makes (or finds) the Linux bridge name with address cidr, up: a
// node's pod network, whose gateway address exists before any pod, so
// that the API server can serve on it. The CNI bridge plugin then puts
// pods on it.
func Bridge(name, cidr string) (func() error, error) {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("kubetest: bridge %s: %w", name, err)
	}
	run := func(args ...string) error {
		out, err := execOutput("ip", args...)
		if err != nil {
			return fmt.Errorf("kubetest: ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if _, err := net.InterfaceByName(name); err != nil {
		if err := run("link", "add", name, "type", "bridge"); err != nil {
			return nil, err
		}
	}
	if addrs, err := interfaceAddrs(name); err != nil {
		return nil, err
	} else if !addrs[ip.String()] {
		if err := run("addr", "add", cidr, "dev", name); err != nil {
			return nil, err
		}
	}
	if err := run("link", "set", name, "up"); err != nil {
		return nil, err
	}
	return func() error { return run("link", "del", name) }, nil
}

func interfaceAddrs(name string) (map[string]bool, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	out := map[string]bool{}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out[n.IP.String()] = true
		}
	}
	return out, nil
}

func (s *Server) addProcess(p *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.controllers = append(s.controllers, p)
}

// insecureTransport trusts any certificate: for the health endpoints of
// the controllers, which serve a certificate they signed themselves.
func insecureTransport() *http.Transport {
	//nolint:gosec // loopback health checks of processes this package started
	return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
}

func execOutput(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}
