// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/plegkit/pleg/internal/testing/promtest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// scraped runs a Prometheus that finds pleg's pod through the API server
// (kubernetes_sd_configs, role pod), relabelled as docs/kubernetes.md
// tells a Prometheus without the operator, with the chart's rules, and
// checks the series and the rules' evaluation on them.
func (c *cluster) scraped(t *testing.T, ctx context.Context) {
	bin := promtest.Require(t)
	// The chart's rules rendered with its defaults (job pleg), as a rule
	// file for a Prometheus without the operator.
	rules, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "prometheus", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	prom := promtest.StartT(t, bin, promtest.Config{
		RuleFiles: map[string][]byte{"pleg.rules.yaml": rules},
		ScrapeConfigs: []promtest.ScrapeConfig{{
			JobName: "pleg",
			KubernetesSDConfigs: []promtest.KubernetesSDConfig{{
				APIServer:     c.server.URL(),
				Role:          "pod",
				Namespaces:    &promtest.KubernetesNamespaces{Names: []string{namespace}},
				TLSConfig:     promtest.TLSConfig{CAFile: c.server.CAFile()},
				Authorization: promtest.Authorization{Credentials: kubetest.AdminToken},
			}},
			// The chart's pods by their name label and metrics port; the
			// node's name as instance and node.
			RelabelConfigs: []promtest.RelabelConfig{
				{SourceLabels: []string{"__meta_kubernetes_pod_label_app_kubernetes_io_name"}, Regex: "pleg", Action: "keep"},
				{SourceLabels: []string{"__meta_kubernetes_pod_container_port_name"}, Regex: "metrics", Action: "keep"},
				{SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "instance"},
				{SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node"},
				{TargetLabel: "job", Replacement: str("pleg")},
			},
		}},
	})
	if err := promtest.Wait(ctx, "pleg's pod scraped as job=pleg, instance="+nodeName, func(ctx context.Context) (bool, error) {
		v, err := prom.Query(ctx, fmt.Sprintf(`up{job="pleg",instance=%q} == 1`, nodeName))
		return err == nil && len(v) == 1, err
	}); err != nil {
		targets, _ := prom.Targets(ctx)
		t.Fatalf("%v\ntargets: %+v", err, targets)
	}
	if err := promtest.Wait(ctx, "the rules evaluated on pleg's series", func(ctx context.Context) (bool, error) {
		rs, err := prom.Rules(ctx)
		if err != nil || len(rs) == 0 {
			return false, err
		}
		for _, r := range rs {
			if r.Health != "ok" {
				return false, fmt.Errorf("rule %s: %s %s", r.Name, r.Health, r.LastError)
			}
			// An alert evaluated before the first scrape (PlegAbsent) is
			// pending until the next evaluation: wait for it to settle.
			if r.Type == "alerting" && r.State != "inactive" {
				return false, fmt.Errorf("alert %s is %s on a healthy node", r.Name, r.State)
			}
		}
		v, err := prom.Query(ctx, fmt.Sprintf(`node_quantile:pleg_relist_duration_seconds:histogram_quantile{instance=%q}`, nodeName))
		return err == nil && len(v) > 0, err
	}); err != nil {
		t.Fatal(err)
	}
}
