// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubeletpleg

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
)

// DefaultPort is the kubelet's authenticated port.
const DefaultPort = 10250

// ServiceAccountTokenFile is where a pod's own service account token is
// mounted; ServiceAccountCAFile the cluster's CA beside it.
const (
	ServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	ServiceAccountCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// DirectOptions say how to reach the kubelet's port.
type DirectOptions struct {
	// URL is the kubelet's: https://NODE_IP:10250, with or without the
	// /metrics path.
	URL string
	// Credentials, if set, are a kubeconfig's (its client certificate or
	// token); its server and CA are not used: the kubelet has its own.
	Credentials *rest.Config
	// TokenFile is a bearer token's file, read again as it rotates (a
	// pod's projected service account token). Used when Credentials is
	// nil.
	TokenFile string
	// CAFile is the CA that signed the kubelet's serving certificate.
	// Kubelets serve a self-signed certificate unless their serving
	// certificates are bootstrapped from the cluster's CA
	// (serverTLSBootstrap): then the cluster's CA is the one.
	CAFile string
	// InsecureSkipVerify trusts any certificate the kubelet presents
	// (metrics-server's --kubelet-insecure-tls): the credential is sent
	// to whatever listens at URL.
	InsecureSkipVerify bool
}

// NewDirect returns a Fetcher of the kubelet's own port: the least
// authority, get on nodes/metrics.
func NewDirect(o DirectOptions) (Fetcher, error) {
	u, err := url.Parse(o.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the kubelet's URL %q: want https://HOST:%d", o.URL, DefaultPort)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("the kubelet's URL %q: want https://HOST:%d", o.URL, DefaultPort)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/metrics"
	}
	cfg := &rest.Config{}
	if o.Credentials != nil {
		cfg = rest.CopyConfig(o.Credentials)
		// The kubeconfig's CA signed the API server's certificate, not
		// the kubelet's, and its proxy and server are the API server's.
		cfg.CAFile, cfg.CAData, cfg.ServerName = "", nil, ""
	} else {
		cfg.BearerTokenFile = o.TokenFile
	}
	cfg.Host = u.Scheme + "://" + u.Host
	cfg.Insecure = o.InsecureSkipVerify
	if !o.InsecureSkipVerify {
		cfg.CAFile = o.CAFile
	}
	if u.Scheme == "http" && (cfg.BearerToken != "" || cfg.BearerTokenFile != "") {
		return nil, errors.New("the kubelet's URL is http://: a bearer token would go in clear; use https")
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's client: %w", err)
	}
	where := u.String()
	if o.InsecureSkipVerify {
		where += " (its certificate not verified)"
	}
	return &httpFetcher{client: client, url: u.String(), where: where}, nil
}

// NewProxy returns a Fetcher through the API server's node proxy
// (/api/v1/nodes/NODE/proxy/metrics) with a kubeconfig's credentials.
// The API server reaches the kubelet with its own client certificate, so
// no kubelet CA is needed; but get on nodes/proxy is broad (it reaches
// the kubelet's whole API: exec, logs, every pod of the node), where the
// direct port needs only nodes/metrics.
func NewProxy(cfg *rest.Config, node string) (Fetcher, error) {
	if cfg == nil || cfg.Host == "" {
		return nil, errors.New("the node proxy: no API server")
	}
	if node == "" {
		return nil, errors.New("the node proxy: no node name")
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the API server's client: %w", err)
	}
	host := strings.TrimSuffix(cfg.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u := host + "/api/v1/nodes/" + url.PathEscape(node) + "/proxy/metrics"
	return &httpFetcher{client: client, url: u, where: "the API server's node proxy: " + u}, nil
}
