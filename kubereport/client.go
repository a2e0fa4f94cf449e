// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"errors"
	"fmt"
	"time"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// ClientOptions say how to reach the API server.
type ClientOptions struct {
	// Kubeconfig is a kubeconfig file; InCluster uses the pod's service
	// account instead. Exactly one is set.
	Kubeconfig string
	InCluster  bool
	// UserAgent names the client in the API server's logs.
	UserAgent string
	// Timeout bounds each request (default 10 s): a slow API server
	// delays a report, never more.
	Timeout time.Duration
	// QPS and Burst bound the requests the client sends, on average and
	// at once (DefaultQPS, DefaultBurst), all of them together: the node
	// condition's and the events'. Zero takes the default.
	QPS   float32
	Burst int
}

// Defaults of ClientOptions. A node's pleg sends at most one request in
// any two seconds, whatever happens on the node: a fleet of N nodes never
// more than N in any two seconds. pleg needs far less: a condition
// written at most every 5 s and a heartbeat every 5 minutes, and a few
// events when something changes. (The kubelet's own client may send 50 a
// second, in bursts of 100.)
const (
	DefaultQPS   = 0.5
	DefaultBurst = 1
)

// NewClient returns a client of the core and events.k8s.io APIs alone,
// rate-limited well below client-go's defaults, by one token bucket that
// both APIs share: a node daemon writes a condition and a few events.
func NewClient(opts ClientOptions) (Client, error) {
	var cfg *rest.Config
	var err error
	switch {
	case opts.InCluster == (opts.Kubeconfig != ""):
		return nil, errors.New("kubereport: want either a kubeconfig or in-cluster configuration")
	case opts.InCluster:
		cfg, err = rest.InClusterConfig()
	default:
		cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubereport: %w", err)
	}
	cfg.UserAgent = opts.UserAgent
	cfg.Timeout = opts.Timeout
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if !(cfg.QPS > 0) || cfg.Burst < 0 {
		return nil, fmt.Errorf("kubereport: QPS %v and burst %d must be positive", cfg.QPS, cfg.Burst)
	}
	// One bucket for both clients: each would otherwise make its own from
	// QPS and Burst, and the node could send twice what they say.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubereport: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("kubereport: %w", err)
	}
	ev, err := eventsv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("kubereport: %w", err)
	}
	return client{core: core, events: ev}, nil
}

type client struct {
	core   corev1client.CoreV1Interface
	events eventsv1client.EventsV1Interface
}

func (c client) CoreV1() corev1client.CoreV1Interface       { return c.core }
func (c client) EventsV1() eventsv1client.EventsV1Interface { return c.events }
