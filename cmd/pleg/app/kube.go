// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/plegkit/pleg/internal/version"
	"github.com/plegkit/pleg/kubereport"
)

// kubeFlags are pleg run's flags for reporting into the Kubernetes API.
type kubeFlags struct {
	kubeconfig string
	inCluster  bool
	nodeName   string
	qps        float32
	burst      int
	heartbeat  time.Duration
}

func (k *kubeFlags) register(f *pflag.FlagSet) {
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "report a node condition and events to the Kubernetes API server of "+
		"this kubeconfig file")
	f.BoolVar(&k.inCluster, "in-cluster", false, "report a node condition and events to the Kubernetes API server, with "+
		"the pod's service account")
	f.StringVar(&k.nodeName, "node-name", "", "the Node object to report on (default: $NODE_NAME, else the host name)")
	f.Float32Var(&k.qps, "kube-api-qps", kubereport.DefaultQPS, "requests a second to the Kubernetes API server, on "+
		"average")
	f.IntVar(&k.burst, "kube-api-burst", kubereport.DefaultBurst, "requests to the Kubernetes API server at once, at most")
	f.DurationVar(&k.heartbeat, "heartbeat-period", kubereport.DefaultHeartbeat,
		"how often the node condition's lastHeartbeatTime is refreshed while nothing changes (node-problem-detector's "+
			"--k8s-exporter-heartbeat-period)")
}

func (k *kubeFlags) enabled() bool { return k.kubeconfig != "" || k.inCluster }

func (k *kubeFlags) validate() error {
	switch {
	case !(k.qps > 0): // NaN too
		return fmt.Errorf("--kube-api-qps %v: must be more than 0", k.qps)
	case k.burst < 1:
		return fmt.Errorf("--kube-api-burst %d: must be at least 1", k.burst)
	case k.kubeconfig != "" && k.inCluster:
		return errors.New("--kubeconfig and --in-cluster: want one of them")
	case k.nodeName != "" && !k.enabled():
		return errors.New("--node-name: only with --kubeconfig or --in-cluster")
	case k.heartbeat != kubereport.DefaultHeartbeat && !k.enabled():
		return errors.New("--heartbeat-period: only with --kubeconfig or --in-cluster")
	case k.heartbeat < kubereport.DefaultMinWriteInterval:
		return fmt.Errorf("--heartbeat-period %v: must be at least %v, the least time between two writes of the condition",
			k.heartbeat, kubereport.DefaultMinWriteInterval)
	case !k.enabled():
		return nil
	}
	name, err := k.node()
	if err != nil {
		return err
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("--node-name %q: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// node is the node name: the flag, the downward API's NODE_NAME, or the
// host name in lower case, as the kubelet names its node.
func (k *kubeFlags) node() (string, error) {
	if k.nodeName != "" {
		return k.nodeName, nil
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("--node-name: not set, no NODE_NAME, and the host name is unknown: %w", err)
	}
	return strings.ToLower(h), nil
}

// config returns the reporter's configuration, or nil when reporting is
// off. It reads the kubeconfig or the service account, and calls nothing.
func (k *kubeFlags) config() (*kubereport.Config, error) {
	if !k.enabled() {
		return nil, nil
	}
	name, err := k.node()
	if err != nil {
		return nil, err
	}
	client, err := kubereport.NewClient(kubereport.ClientOptions{
		Kubeconfig: k.kubeconfig,
		InCluster:  k.inCluster,
		UserAgent:  "pleg/" + version.Get().Version + " (" + name + ")",
		QPS:        k.qps,
		Burst:      k.burst,
	})
	if err != nil {
		return nil, err
	}
	return &kubereport.Config{NodeName: name, Client: client, Heartbeat: k.heartbeat}, nil
}
