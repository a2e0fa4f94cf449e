// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package incident

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/internal/testing/promtest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// namespace is where every node's release of pleg goes, as the README
// installs it.
const namespace = "kube-system"

// env is what the causes share: the cluster, pleg on every node, a
// Prometheus with the chart's rules, and the alerts it fired.
type env struct {
	cl   *kubetest.Cluster
	root string
	// pleg is the pleg binary, as an operator copies it onto the node for
	// `pleg doctor` over SSH.
	pleg string
	prom *promtest.Server
	// dirs are each node's pleg state and API directories on the host.
	dirs   map[string]nodeDirs
	alerts *alertLog
	// healthyPaged is set when a page fired for a node before its fault.
	healthyPaged atomic.Bool
}

type nodeDirs struct{ state, api string }

// release is the chart's release on node: one a node, since the nodes of
// this machine share one filesystem and each runtime has its own socket.
func release(node string) string { return "pleg-" + node }

// setUp builds pleg's image as `make image` does, imports it into every
// node's runtime, installs the chart on each node, and starts a
// Prometheus that scrapes every pleg at the chart's interval and
// evaluates the chart's rules.
func setUp(t *testing.T, ctx context.Context, cl *kubetest.Cluster) *env {
	t.Helper()
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cl: cl, root: root, dirs: map[string]nodeDirs{}}
	e.pleg = kubetest.BuildPleg(t, root)
	ref := e.image(t, ctx)
	for _, n := range cl.Nodes {
		dirs := nodeDirs{state: filepath.Join(t.TempDir(), "state"), api: filepath.Join(t.TempDir(), "api")}
		e.dirs[n.Name] = dirs
		repo, tag, _ := strings.Cut(ref, ":")
		out, err := cl.Run(ctx, "helm", "install", release(n.Name), filepath.Join(root, "charts", "pleg"),
			"--namespace", namespace,
			"--set", "image.repository="+repo, "--set", "image.tag="+tag,
			"--set", "runtime.socket="+strings.TrimPrefix(n.Runtime.Endpoint, "unix://"),
			"--set", "stateDir.hostPath="+dirs.state, "--set", "apiSocket.hostPath="+dirs.api,
			"--set", `nodeSelector.kubernetes\.io/hostname=`+n.Name,
			// Every release's series carry job="pleg", as the rules of
			// deploy/prometheus select them.
			"--set", "metrics.job=pleg",
			"--wait", "--timeout", "5m")
		if err != nil {
			t.Fatalf("helm install on %s: %v\n%s", n.Name, err, out)
		}
	}
	e.prom = e.prometheus(t, ctx)
	e.alerts = watchAlerts(t, e.prom)
	return e
}

// image builds pleg's image for this machine's platform into a directory
// of the test's and imports it into every node's containerd with ctr, as
// docs/kubernetes.md loads it on a node without a registry; it returns
// its reference.
func (e *env) image(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "make", "image", "IMAGE_DIR="+dir, "IMAGE_PLATFORMS=linux/"+runtime.GOARCH)
	cmd.Dir = e.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	ref, err := os.ReadFile(filepath.Join(dir, "ref"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range e.cl.Nodes {
		imp := exec.CommandContext(ctx, n.Runtime.Bin.Ctr, "--address", strings.TrimPrefix(n.Runtime.Endpoint, "unix://"),
			"--namespace", "k8s.io", "images", "import", "--snapshotter", "native", filepath.Join(dir, "pleg.tar"))
		if out, err := imp.CombinedOutput(); err != nil {
			t.Fatalf("ctr images import on %s: %v\n%s", n.Name, err, out)
		}
	}
	return strings.TrimSpace(string(ref))
}

// chartScrapeInterval is the chart's podMonitor.interval: the scrape
// interval the pages are timed with.
func chartScrapeInterval(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "charts", "pleg", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		PodMonitor struct {
			Interval string `json:"interval"`
		} `json:"podMonitor"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil || v.PodMonitor.Interval == "" {
		t.Fatalf("the chart's podMonitor.interval: %q, %v", v.PodMonitor.Interval, err)
	}
	return v.PodMonitor.Interval
}

// prometheus starts a Prometheus that finds every pleg pod through the
// API server, as docs/kubernetes.md's scrape configuration does, at the
// chart's interval, with the chart's rules rendered with its defaults
// (deploy/prometheus), evaluated at their own interval; the global
// evaluation interval is kube-prometheus-stack's 30 s.
func (e *env) prometheus(t *testing.T, ctx context.Context) *promtest.Server {
	t.Helper()
	bin := promtest.Require(t)
	rules, err := os.ReadFile(filepath.Join(e.root, "deploy", "prometheus", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	interval := chartScrapeInterval(t, e.root)
	str := func(s string) *string { return &s }
	p := promtest.StartT(t, bin, promtest.Config{
		EvaluationInterval: 30 * time.Second,
		RuleFiles:          map[string][]byte{"pleg.rules.yaml": rules},
		ScrapeConfigs: []promtest.ScrapeConfig{{
			JobName:        "pleg",
			ScrapeInterval: interval,
			KubernetesSDConfigs: []promtest.KubernetesSDConfig{{
				APIServer:     e.cl.Server.URL(),
				Role:          "pod",
				Namespaces:    &promtest.KubernetesNamespaces{Names: []string{namespace}},
				TLSConfig:     promtest.TLSConfig{CAFile: e.cl.Server.CAFile()},
				Authorization: promtest.Authorization{Credentials: kubetest.AdminToken},
			}},
			RelabelConfigs: []promtest.RelabelConfig{
				{SourceLabels: []string{"__meta_kubernetes_pod_label_app_kubernetes_io_name"}, Regex: "pleg", Action: "keep"},
				{SourceLabels: []string{"__meta_kubernetes_pod_container_port_name"}, Regex: "metrics", Action: "keep"},
				{SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "instance"},
				{SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node"},
				{TargetLabel: "job", Replacement: str("pleg")},
			},
		}},
	})
	for _, n := range e.cl.Nodes {
		if err := promtest.Wait(ctx, "pleg on "+n.Name+" scraped", func(ctx context.Context) (bool, error) {
			v, err := p.Query(ctx, fmt.Sprintf(`up{job="pleg",node=%q} == 1`, n.Name))
			return err == nil && len(v) == 1, err
		}); err != nil {
			targets, _ := p.Targets(ctx)
			t.Fatalf("%v\ntargets: %+v", err, targets)
		}
	}
	t.Logf("Prometheus scrapes every pleg each %s; the chart's rules evaluate at their own interval", interval)
	return p
}

// alertLog records, for every alert and node, when Prometheus first
// held it firing.
type alertLog struct {
	mu     sync.Mutex
	firing map[string]time.Time // name/node
	sev    map[string]string
	stop   func()
}

func watchAlerts(t *testing.T, p *promtest.Server) *alertLog {
	l := &alertLog{firing: map[string]time.Time{}, sev: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			alerts, err := p.Alerts(ctx)
			now := time.Now()
			if err == nil {
				l.mu.Lock()
				for _, a := range alerts {
					k := a.Name() + "/" + a.Labels["node"]
					if _, ok := l.firing[k]; !ok && a.State == "firing" {
						l.firing[k] = now
						l.sev[k] = a.Labels["severity"]
					}
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	l.stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(l.stop)
	return l
}

// page is the first critical alert that fired for node at or after from.
type page struct {
	name string
	at   time.Time
}

func (l *alertLog) firstPage(node string, from time.Time) (page, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best page
	for k, at := range l.firing {
		name, n, _ := strings.Cut(k, "/")
		if n != node || l.sev[k] != "critical" || at.Before(from) {
			continue
		}
		if best.at.IsZero() || at.Before(best.at) {
			best = page{name, at}
		}
	}
	return best, !best.at.IsZero()
}

// pagesBefore lists the critical alerts that fired for node before t.
func (l *alertLog) pagesBefore(node string, t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, at := range l.firing {
		name, n, _ := strings.Cut(k, "/")
		if n == node && l.sev[k] == "critical" && at.Before(t) {
			out = append(out, name+" at "+at.Format(time.TimeOnly))
		}
	}
	return out
}

// healthyPages tells, and has logged through the causes, whether a page
// fired for a node while it was healthy.
func (e *env) healthyPages() bool {
	return e.healthyPaged.Load()
}
