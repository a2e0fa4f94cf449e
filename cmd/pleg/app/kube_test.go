// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKubeFlagsAreCheckedBeforeAnythingStarts(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--kubeconfig", kubeconfig, "--in-cluster"}, "--kubeconfig and --in-cluster: want one of them"},
		{[]string{"run", "--node-name", "node-1"}, "--node-name: only with --kubeconfig or --in-cluster"},
		{[]string{"run", "--kubeconfig", kubeconfig, "--node-name", "Node_1"}, `--node-name "Node_1": a lowercase RFC 1123 subdomain`},
		{[]string{"run", "--kubeconfig", "/nonexistent/kubeconfig", "--node-name", "node-1"}, "/nonexistent/kubeconfig"},
		{[]string{"run", "--kubeconfig", kubeconfig, "--kube-api-qps", "0"}, "--kube-api-qps 0: must be more than 0"},
		{[]string{"run", "--kubeconfig", kubeconfig, "--kube-api-qps", "NaN"}, "--kube-api-qps NaN: must be more than 0"},
		{[]string{"run", "--kubeconfig", kubeconfig, "--kube-api-burst", "0"}, "--kube-api-burst 0: must be at least 1"},
		{[]string{"run", "--heartbeat-period", "1m"}, "--heartbeat-period: only with --kubeconfig or --in-cluster"},
		{[]string{"run", "--kubeconfig", kubeconfig, "--heartbeat-period", "1s"}, "--heartbeat-period 1s: must be at least 5s"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := run(t, append(tc.args, "--runtime-endpoint=unix:///nonexistent/cri.sock", "--listen=127.0.0.1:0")...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestNodeName(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag, env, want string
	}{
		{flag: "node-1", env: "node-2", want: "node-1"},
		{env: "node-2", want: "node-2"},
		{want: strings.ToLower(host)},
	} {
		t.Setenv("NODE_NAME", tc.env)
		k := kubeFlags{nodeName: tc.flag, inCluster: true}
		if got, err := k.node(); err != nil || got != tc.want {
			t.Errorf("flag %q, NODE_NAME %q: node %q, %v; want %q", tc.flag, tc.env, got, err, tc.want)
		}
	}
}

func TestKubeconfigMakesAReporter(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	k := kubeFlags{kubeconfig: kubeconfig, nodeName: "node-1", qps: 1, burst: 2, heartbeat: time.Minute}
	if err := k.validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := k.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeName != "node-1" || cfg.Client == nil || cfg.Heartbeat != time.Minute {
		t.Errorf("config %+v", cfg)
	}
	if cfg, err := (&kubeFlags{qps: 1, burst: 2}).config(); cfg != nil || err != nil {
		t.Errorf("without flags: %+v, %v; want reporting off", cfg, err)
	}
}

// writeKubeconfig writes a kubeconfig of an API server that is not there.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
