// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/kubeletpleg"
)

// kubeletNone and kubeletAuto are --kubelet's words: read no kubelet, or
// find the way (see kubeletSource).
const (
	kubeletNone = "none"
	kubeletAuto = "auto"
)

// doctorKernelLogLookback is how far back doctor reads the kernel log: an
// operator runs it minutes after the page.
const doctorKernelLogLookback = 15 * time.Minute

// nodeFlags are pleg doctor's settings for the node below the CRI: its
// /proc and cgroups, its kernel log, and the kubelet's own PLEG.
type nodeFlags struct {
	probe      bool
	procRoot   string
	cgroupRoot string
	kernelLog  bool
	kubeletFlags
}

// kubeletFlags say how to read the kubelet's own PLEG from its metrics:
// pleg doctor's and pleg run's.
type kubeletFlags struct {
	kubelet          string
	tokenFile        string
	caFile           string
	insecure         bool
	kubeconfig       string
	nodeName         string
	serviceAccountAt string // the service account's token, where a pod has it; tests move it
}

func (n *nodeFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&n.probe, "node-probe", true, "read the node below the CRI, as the flight recorder does: the runtime's "+
		"processes, its shims, the runc and CNI plugin processes they run and their ages, processes in D or T, the "+
		"kubelet, PIDs against pid_max and the pids cgroups, pressure, memory, mounts that do not answer; "+
		"read only, each read bounded")
	f.StringVar(&n.procRoot, "proc-root", "/proc", "the /proc to read (the host's, mounted elsewhere in a container)")
	f.StringVar(&n.cgroupRoot, "cgroup-root", "/sys/fs/cgroup", "the cgroup file systems to read")
	f.BoolVar(&n.kernelLog, "kernel-log", true, "read the kernel log's lines of hung tasks, OOM kills and I/O errors of "+
		"the last 15 minutes (/dev/kmsg, else syslog(2); needs CAP_SYSLOG where kernel.dmesg_restrict is 1)")
	n.kubeletFlags.register(f, kubeletAuto, true)
}

// register declares the kubelet's flags, --kubelet's default def;
// withKubeconfig declares --kubeconfig too (pleg run has its own).
func (n *kubeletFlags) register(f *pflag.FlagSet, def string, withKubeconfig bool) {
	f.StringVar(&n.kubelet, "kubelet", def, `read the kubelet's own PLEG from its metrics: "auto" reads `+
		`https://$NODE_IP:10250 with the pod's service account in a pod, through the API server's node proxy with `+
		`--kubeconfig or $KUBECONFIG, and https://127.0.0.1:10250 with --kubelet-token-file; or the kubelet's URL `+
		`(https://HOST:10250); "none" skips it`)
	f.StringVar(&n.tokenFile, "kubelet-token-file", "", "a bearer token that may get nodes/metrics, for the kubelet's "+
		"port")
	f.StringVar(&n.caFile, "kubelet-ca-file", "", "the CA of the kubelet's serving certificate (default in a pod: the "+
		"cluster's CA, which signs it with serverTLSBootstrap)")
	f.BoolVar(&n.insecure, "kubelet-insecure-skip-tls-verify", false, "trust whatever certificate the kubelet's port "+
		"presents (kubelets serve a self-signed one by default); the credential goes to whatever listens there")
	if withKubeconfig {
		f.StringVar(&n.kubeconfig, "kubeconfig", "", "a kubeconfig: read the kubelet through the API server's node proxy "+
			"(needs get on nodes/proxy), or, with --kubelet URL, its credentials for the kubelet's port")
		f.StringVar(&n.nodeName, "node-name", "", "the node, for the node proxy (default: $NODE_NAME, else the host name)")
	}
	n.serviceAccountAt = kubeletpleg.ServiceAccountTokenFile
}

// validate checks the words and combinations the flags allow.
func (n *kubeletFlags) validate() error {
	switch {
	case n.kubelet == kubeletNone || n.kubelet == kubeletAuto:
	case strings.HasPrefix(n.kubelet, "https://") || strings.HasPrefix(n.kubelet, "http://"):
	default:
		return fmt.Errorf(`--kubelet %q: want "auto", "none" or https://HOST:%d`, n.kubelet, kubeletpleg.DefaultPort)
	}
	if n.insecure && n.caFile != "" {
		return errors.New("--kubelet-insecure-skip-tls-verify and --kubelet-ca-file: want one of them")
	}
	return nil
}

// prober returns the node's probe for the endpoint, nil with
// --node-probe=false. A way to read the kubelet that cannot be built is
// told on the report's kubelet part.
func (n *nodeFlags) prober(endpoint string, timeout time.Duration) *flightrec.NodeProbe {
	if !n.probe {
		return nil
	}
	part := min(flightrec.DefaultPartTimeout, max(timeout/4, time.Second))
	cfg := flightrec.NodeConfig{Endpoint: endpoint, Proc: n.procRoot, Cgroup: n.cgroupRoot,
		KernelLog: n.kernelLog, KernelLogLookback: doctorKernelLogLookback, PartTimeout: part}
	if src, err := n.kubeletSource(part * 4 / 5); err != nil {
		cfg.Kubelet = failedSource{where: "the kubelet", err: err}
	} else if src != nil {
		cfg.Kubelet = src
	}
	return flightrec.NewNodeProbe(cfg)
}

// kubeletSource builds the way to the kubelet's metrics the flags say;
// nil when there is none.
func (n *kubeletFlags) kubeletSource(timeout time.Duration) (kubeletpleg.Source, error) {
	f, err := n.fetcher()
	if f == nil || err != nil {
		return nil, err
	}
	return kubeletpleg.New(f, kubeletpleg.Options{Timeout: timeout}), nil
}

func (n *kubeletFlags) fetcher() (kubeletpleg.Fetcher, error) {
	kubeconfig := n.kubeconfig
	if kubeconfig == "" && n.kubelet == kubeletAuto {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	inPod := fileExists(n.serviceAccountAt)
	switch {
	case n.kubelet == kubeletNone:
		return nil, nil
	case n.kubelet != kubeletAuto:
		o := kubeletpleg.DirectOptions{URL: n.kubelet, TokenFile: n.tokenFile, CAFile: n.caFile,
			InsecureSkipVerify: n.insecure}
		if kubeconfig != "" {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return nil, fmt.Errorf("--kubeconfig: %w", err)
			}
			o.Credentials = cfg
		} else if o.TokenFile == "" && inPod {
			o.TokenFile = n.serviceAccountAt
		}
		n.podCA(&o, inPod)
		return kubeletpleg.NewDirect(o)
	case kubeconfig != "":
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		node, err := n.node()
		if err != nil {
			return nil, err
		}
		return kubeletpleg.NewProxy(cfg, node)
	case inPod || n.tokenFile != "":
		host, port := "127.0.0.1", kubeletpleg.DefaultPort
		if ip := os.Getenv("NODE_IP"); ip != "" && inPod {
			host = ip
			port = n.podKubeletPort()
		}
		o := kubeletpleg.DirectOptions{URL: "https://" + net.JoinHostPort(host, strconv.Itoa(port)),
			TokenFile: n.tokenFile, CAFile: n.caFile, InsecureSkipVerify: n.insecure}
		if o.TokenFile == "" {
			o.TokenFile = n.serviceAccountAt
		}
		n.podCA(&o, inPod)
		return kubeletpleg.NewDirect(o)
	}
	return nil, nil
}

// podKubeletPort is the port the kubelet says it serves on, in its
// node's status (daemonEndpoints), as metrics-server finds it: a kubelet
// may be set to serve elsewhere than 10250. It asks the API server with
// the pod's own credentials (pleg's role may get its node); 10250 when
// the node cannot be read, so that a read of the kubelet still says why
// it failed.
func (n *kubeletFlags) podKubeletPort() int {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return kubeletpleg.DefaultPort
	}
	cfg.Timeout = kubeletPortLookupTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return kubeletpleg.DefaultPort
	}
	name, err := n.node()
	if err != nil {
		return kubeletpleg.DefaultPort
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubeletPortLookupTimeout)
	defer cancel()
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || node.Status.DaemonEndpoints.KubeletEndpoint.Port <= 0 {
		return kubeletpleg.DefaultPort
	}
	return int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
}

// kubeletPortLookupTimeout bounds the one read of the node at start: an
// API server that does not answer costs the daemon's start no more.
const kubeletPortLookupTimeout = 5 * time.Second

// podCA takes, in a pod, the cluster's CA for the kubelet's where none
// is given: it is the kubelet's with serverTLSBootstrap.
func (n *kubeletFlags) podCA(o *kubeletpleg.DirectOptions, inPod bool) {
	ca := strings.TrimSuffix(n.serviceAccountAt, "token") + "ca.crt"
	if o.CAFile == "" && !o.InsecureSkipVerify && inPod && fileExists(ca) {
		o.CAFile = ca
	}
}

// node is the node's name: the flag, the downward API's NODE_NAME, or
// the host name in lower case, as the kubelet names its node.
func (n *kubeletFlags) node() (string, error) {
	if n.nodeName != "" {
		return n.nodeName, nil
	}
	if v := os.Getenv("NODE_NAME"); v != "" {
		return v, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("--node-name: not set, no NODE_NAME, and the host name is unknown: %w", err)
	}
	return strings.ToLower(h), nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// failedSource is a way to the kubelet's metrics that could not be made
// (a kubeconfig that does not load, a bad URL): each read tells why, in
// the report, rather than failing the diagnosis.
type failedSource struct {
	where string
	err   error
}

func (f failedSource) Read(context.Context) kubeletpleg.Reading {
	return kubeletpleg.Reading{Source: f.where, ReadAt: time.Now(), Error: f.err.Error()}
}
