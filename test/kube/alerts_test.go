// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/internal/testing/promtest"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// The two nodes of the alert test: one whose runtime answers, one whose
// container list hangs.
const (
	healthyNode = "node-healthy"
	hungNode    = "node-hung"
	clusterName = "e2e"
)

// forInTest replaces the shipped rules' for: (1 to 15 minutes), and
// nothing else: the thresholds in their expressions stay as shipped.
const forInTest = 5 * time.Second

// pagesInOrder are the critical alerts a hung container list fires, in
// the order they must: the runtime unanswered for 20 s, no relist for
// half the threshold, none for the threshold.
var pagesInOrder = []string{"PlegRuntimeNotAnswering", "PlegRelistNearThreshold", "PlegNotHealthy"}

// TestAlertsInARealPrometheus runs two pleg daemons (the pleg binary,
// pleg run) over simulated runtimes, reporting to the real API server,
// scraped by a real Prometheus as the chart's PodMonitor has the
// Prometheus operator scrape them, evaluating the chart's rules with only
// their for: shortened. The runtime of one node hangs its container
// list: PlegRuntimeNotAnswering, PlegRelistNearThreshold and then
// PlegNotHealthy fire for that node alone,
// the dashboard's every query returns data meanwhile, both alerts
// resolve once the runtime answers, and PlegDown fires when its pleg
// stops. No alert ever names the healthy node. It logs how long each
// alert took from the hang.
func TestAlertsInARealPrometheus(t *testing.T) {
	srv, cs := apiServer(t)
	prom := promtest.Require(t)
	plegBin := kubetest.BuildPleg(t, "../..")
	kubeconfig, err := srv.WriteKubeconfig("alerts-admin", kubetest.AdminToken)
	if err != nil {
		t.Fatal(err)
	}

	// The chart as the Prometheus operator installs it: its PodMonitor
	// turned into Prometheus' scrape configuration, its PrometheusRule
	// into a rule file.
	r := readRender(t, "crio-operator")
	ds := one(t, r, "DaemonSet")
	podLabels, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "template", "metadata", "labels")
	// The job the PodMonitor gives the series, which the release's rules
	// and dashboard select: the release's name.
	jobLabel, _, _ := unstructured.NestedString(one(t, r, "PodMonitor").Object, "spec", "jobLabel")
	job := podLabels[jobLabel]
	if job == "" {
		t.Fatalf("the PodMonitor's jobLabel %q names no label of the pods %v", jobLabel, podLabels)
	}

	healthySim := startSim(t, sim.Options{Pods: 6, Containers: 2, Churn: sim.Churn{Crashes: 0.5, ShortLived: 0.5}})
	hungSim := startSim(t, sim.Options{Pods: 6, Containers: 2, Churn: sim.Churn{Crashes: 0.5}})
	daemons := map[string]*plegProcess{}
	for node, s := range map[string]*sim.Sim{healthyNode: healthySim, hungNode: hungSim} {
		createNode(t, cs, node)
		daemons[node] = startPleg(t, plegBin, "run", "-r", s.Endpoint(),
			"--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
			"--kubeconfig="+kubeconfig, "--node-name="+node, "--log-format=json",
			// Each runtime call's deadline: a hung list fails after it,
			// and the next relist hangs again.
			"--timeout=20s")
	}
	rules, err := yaml.Marshal(one(t, r, "PrometheusRule").Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if rules, err = promtest.ShortenFor(rules, forInTest); err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{}
	for node, d := range daemons {
		targets[node] = d.metrics
	}
	p := promtest.StartT(t, prom, promtest.Config{
		ScrapeConfigs: []promtest.ScrapeConfig{scrapeConfig(t, one(t, r, "PodMonitor"), podLabels, targets)},
		RuleFiles:     map[string][]byte{"pleg.rules.yaml": rules},
	})
	ctx := t.Context()

	within := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(ctx, d)
		t.Cleanup(cancel)
		return c
	}
	// Both nodes scraped, as the rules select them, and relisting.
	for _, node := range []string{healthyNode, hungNode} {
		expr := fmt.Sprintf(`time() - kubelet_pleg_last_seen_seconds{job=%q, instance=%q, node=%q, cluster=%q} < 60`, job, node, node, clusterName)
		if err := waitQuery(within(2*time.Minute), p, expr); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing fires while both nodes are healthy (PlegAbsent may have,
	// with its for: shortened, before the first scrapes).
	if err := p.WaitNoAlert(within(2*time.Minute), promtest.AlertMatch{}); err != nil {
		t.Fatal(err)
	}
	watch := watchAlerts(ctx, t, p)

	hungAt := time.Now()
	if err := hungSim.SetFaults(sim.Faults{Hang: map[string]bool{"list_containers": true}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the container list of %s hangs from now on", hungNode)
	var fired []promtest.Alert
	for _, name := range pagesInOrder {
		a, err := p.WaitAlert(within(7*time.Minute), promtest.AlertIs(name, "firing", map[string]string{"instance": hungNode}))
		if err != nil {
			t.Fatal(err)
		}
		checkAlert(t, a, "critical", job)
		if n := len(fired); n > 0 && a.ActiveAt.Before(fired[n-1].ActiveAt) {
			t.Errorf("%s active at %v, before %s at %v", a, a.ActiveAt, fired[n-1], fired[n-1].ActiveAt)
		}
		fired = append(fired, a)
	}
	// The node's PLEGDegraded condition, as the dashboard reads it.
	if err := waitQuery(within(2*time.Minute), p, fmt.Sprintf(`pleg_node_condition{job=%q, instance=%q, status="True"} == 1`, job, hungNode)); err != nil {
		t.Fatal(err)
	}
	checkRules(t, p)

	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, p, r) })

	recoveredAt := time.Now()
	if err := hungSim.SetFaults(sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range pagesInOrder {
		if err := p.WaitNoAlert(within(3*time.Minute), promtest.AlertIs(name, "", map[string]string{"instance": hungNode})); err != nil {
			t.Fatal(err)
		}
	}
	resolvedAfter := time.Since(recoveredAt)
	if err := waitQuery(within(2*time.Minute), p, fmt.Sprintf(`pleg_node_condition{job=%q, instance=%q, status="False"} == 1`, job, hungNode)); err != nil {
		t.Fatal(err)
	}

	stoppedAt := time.Now()
	if err := daemons[hungNode].stop(); err != nil {
		t.Error(err)
	}
	if _, err := p.WaitAlert(within(2*time.Minute), promtest.AlertIs("PlegDown", "firing", map[string]string{"instance": hungNode})); err != nil {
		t.Fatal(err)
	}
	downAfter := time.Since(stoppedAt)

	seen := watch.stop()
	for _, a := range seen {
		if a.Labels["instance"] == healthyNode || a.Labels["instance"] == "" && a.Name() != "PlegDown" {
			t.Errorf("alert %s: none should name the healthy node, nor all nodes", a)
		}
	}
	t.Logf("from the hang: %s; resolved %v after the runtime answered again; PlegDown %v after pleg stopped (for: %v in place of the shipped)",
		watch.timeline(hungAt, hungNode), resolvedAfter.Round(100*time.Millisecond), downAfter.Round(100*time.Millisecond), forInTest)
}

// checkAlert checks what a receiver gets: the release's job, the node to
// route and inhibit by, the cluster.
func checkAlert(t *testing.T, a promtest.Alert, severity, job string) {
	t.Helper()
	if a.Labels["severity"] != severity || a.Labels["job"] != job || a.Labels["cluster"] != clusterName || a.Labels["node"] != hungNode {
		t.Errorf("alert %s: labels %v", a, a.Labels)
	}
	for _, k := range []string{"summary", "description", "runbook_url"} {
		if a.Annotations[k] == "" || strings.Contains(a.Annotations[k], "{{") {
			t.Errorf("alert %s: annotation %s = %q", a, k, a.Annotations[k])
		}
	}
	if !strings.Contains(a.Annotations["description"], hungNode) {
		t.Errorf("alert %s: the description does not name the node: %q", a, a.Annotations["description"])
	}
}

// checkRules checks that every rule evaluates in the real Prometheus, and
// that the recording rules keep cluster, node and instance.
func checkRules(t *testing.T, p *promtest.Server) {
	t.Helper()
	rules, err := p.Rules(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %s %s", r.Name, r.Health, r.LastError)
		}
	}
	v, err := p.Query(t.Context(), `node_quantile:pleg_relist_duration_seconds:histogram_quantile{quantile="0.99"}`)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, s := range v {
		if s.Metric["cluster"] == clusterName && s.Metric["node"] == s.Metric["instance"] {
			nodes = append(nodes, string(s.Metric["instance"]))
		}
	}
	if slices.Sort(nodes); !slices.Equal(nodes, []string{healthyNode, hungNode}) {
		t.Errorf("recorded relist p99: %v; want both nodes' series, with cluster, node and instance", v)
	}
}

// waitQuery waits until expr returns a sample.
func waitQuery(ctx context.Context, p *promtest.Server, expr string) error {
	return promtest.Wait(ctx, expr, func(ctx context.Context) (bool, error) {
		v, err := p.Query(ctx, expr)
		return len(v) > 0, err
	})
}

// scrapeConfig is the scrape configuration the Prometheus operator makes
// of the PodMonitor pm, for static targets in place of the pods it would
// discover (targets: node name to address): each target has the labels
// Kubernetes' service discovery would give the pod, with podLabels, and
// the cluster label the test's Prometheus gives its targets.
func scrapeConfig(t *testing.T, pm *unstructured.Unstructured, podLabels map[string]string, targets map[string]string) promtest.ScrapeConfig {
	t.Helper()
	var spec struct {
		JobLabel  string `json:"jobLabel"`
		Endpoints []struct {
			Path        string `json:"path"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				Separator    string   `json:"separator"`
				Regex        string   `json:"regex"`
				TargetLabel  string   `json:"targetLabel"`
				Replacement  *string  `json:"replacement"`
				Action       string   `json:"action"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	}
	fromUnstructured(t, pm.Object["spec"], &spec)
	if len(spec.Endpoints) != 1 {
		t.Fatalf("PodMonitor: %d endpoints, want 1", len(spec.Endpoints))
	}
	ep := spec.Endpoints[0]
	sc := promtest.ScrapeConfig{
		JobName:     fmt.Sprintf("podMonitor/%s/%s/0", pm.GetNamespace(), pm.GetName()),
		MetricsPath: ep.Path,
	}
	for _, node := range slices.Sorted(maps.Keys(targets)) {
		labels := map[string]string{"__meta_kubernetes_pod_node_name": node, "cluster": clusterName}
		for k, v := range podLabels {
			labels["__meta_kubernetes_pod_label_"+sanitize(k)] = v
		}
		sc.StaticConfigs = append(sc.StaticConfigs, promtest.StaticConfig{Targets: []string{targets[node]}, Labels: labels})
	}
	// The operator's first relabeling: the job from the pod label that
	// jobLabel names; without one, the job is the PodMonitor's namespace
	// and name.
	if spec.JobLabel != "" {
		sc.RelabelConfigs = append(sc.RelabelConfigs, promtest.RelabelConfig{
			SourceLabels: []string{"__meta_kubernetes_pod_label_" + sanitize(spec.JobLabel)},
			Regex:        "(.+)", TargetLabel: "job", Replacement: ptr("${1}"),
		})
	}
	for _, rl := range ep.Relabelings {
		sc.RelabelConfigs = append(sc.RelabelConfigs, promtest.RelabelConfig{
			SourceLabels: rl.SourceLabels, Separator: rl.Separator, Regex: rl.Regex,
			TargetLabel: rl.TargetLabel, Replacement: rl.Replacement, Action: strings.ToLower(rl.Action),
		})
	}
	return sc
}

// sanitize spells a Kubernetes label name as service discovery does in a
// __meta_ label.
func sanitize(name string) string {
	return regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(name, "_")
}

// alertWatch records the alerts Prometheus holds, polled until stopped:
// every one seen, and when each (name, instance, state) was first seen.
type alertWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	seen  map[string]promtest.Alert
	first map[string]time.Time
}

func watchAlerts(ctx context.Context, t *testing.T, p *promtest.Server) *alertWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &alertWatch{cancel: cancel, done: make(chan struct{}), seen: map[string]promtest.Alert{}, first: map[string]time.Time{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			alerts, err := p.Alerts(ctx)
			now := time.Now()
			if err != nil && ctx.Err() == nil {
				t.Logf("reading the alerts: %v", err)
			}
			w.mu.Lock()
			for _, a := range alerts {
				key := a.Name() + "/" + a.Labels["instance"] + "/" + a.State
				if _, ok := w.first[key]; !ok {
					w.first[key], w.seen[key] = now, a
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch and returns every alert seen.
func (w *alertWatch) stop() []promtest.Alert {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []promtest.Alert
	for _, k := range slices.Sorted(maps.Keys(w.seen)) {
		out = append(out, w.seen[k])
	}
	return out
}

// timeline says when each alert of instance was first seen pending and
// firing, from start.
func (w *alertWatch) timeline(start time.Time, instance string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(w.seen)) {
		a := w.seen[k]
		if a.Labels["instance"] != instance || w.first[k].Before(start) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s after %v", a.Name(), a.State, w.first[k].Sub(start).Round(100*time.Millisecond)))
	}
	slices.SortFunc(parts, func(a, b string) int { return strings.Compare(a, b) })
	return strings.Join(parts, ", ")
}

// plegProcess is a pleg daemon run as its own process.
type plegProcess struct {
	t       *testing.T
	cmd     *exec.Cmd
	metrics string // the address of --metrics-listen
	done    chan struct{}
	err     error

	mu   sync.Mutex
	logs []string
}

// startPleg starts pleg with args (which must include --log-format=json
// and --metrics-listen) and waits until it serves. At the test's end it
// stops it, and checks that it logged nothing but JSON: client-go's lines
// included.
func startPleg(t *testing.T, bin string, args ...string) *plegProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &plegProcess{t: t, cmd: cmd, done: make(chan struct{})}
	serving := make(chan string, 1)
	go p.readLog(stderr, serving)
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
		p.checkLog()
	})
	select {
	case p.metrics = <-serving:
	case <-p.done:
		t.Fatalf("pleg %v exited: %v\n%s", args, p.err, strings.Join(p.logLines(), "\n"))
	case <-time.After(time.Minute):
		t.Fatalf("pleg %v is not serving after a minute:\n%s", args, strings.Join(p.logLines(), "\n"))
	}
	return p
}

// readLog keeps pleg's log lines, and tells the metrics address once it
// serves.
func (p *plegProcess) readLog(r io.Reader, serving chan<- string) {
	defer func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.logs = append(p.logs, line)
		p.mu.Unlock()
		var rec struct{ Msg, Metrics string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "Serving the PLEG API" && rec.Metrics != "" {
			select {
			case serving <- rec.Metrics:
			default:
			}
		}
	}
}

func (p *plegProcess) logLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.logs)
}

// stop sends SIGTERM and waits: pleg exits 0.
func (p *plegProcess) stop() error {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			<-p.done
			return errors.New("pleg did not stop within a minute of SIGTERM")
		}
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return fmt.Errorf("pleg exited %w:\n%s", p.err, strings.Join(p.logLines(), "\n"))
	}
	return nil
}

// checkLog checks that every line pleg logged is JSON.
func (p *plegProcess) checkLog() {
	for _, line := range p.logLines() {
		if !json.Valid([]byte(line)) {
			p.t.Errorf("pleg --log-format=json logged a line that is not JSON: %q", line)
		}
	}
}

// checkDashboard evaluates the query of every panel of the release's
// dashboard (its ConfigMap in the render r, which selects the release's
// job), and of every variable, in the test's Prometheus, with the
// variables set to All and to the hung node: each must parse and return
// data. The annotations' queries must parse (they return data only when
// a condition turns on or pleg restarts). Grafana's own variables take
// values a dashboard of the last hour would.
func checkDashboard(t *testing.T, p *promtest.Server, r render) {
	data, _, _ := unstructured.NestedString(one(t, r, "ConfigMap").Object, "data", "pleg.json")
	var d struct {
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatal(err)
	}
	selections := []map[string]string{
		{"$cluster": ".*", "$instance": ".*"},
		{"$cluster": clusterName, "$instance": hungNode},
	}
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h")
	labelValues := regexp.MustCompile(`^label_values\((.*), *(\w+)\)$`)
	queries := 0
	for _, sel := range selections {
		vars := strings.NewReplacer("$cluster", sel["$cluster"], "$instance", sel["$instance"])
		for _, v := range d.Templating.List {
			q, _ := v.Query.(string)
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(q)
			if m == nil {
				t.Errorf("variable %s: query %q is not label_values(SERIES, LABEL)", v.Name, q)
				continue
			}
			expr := "group by (" + m[2] + ") (" + vars.Replace(m[1]) + ")"
			checkQuery(t, p, "variable "+v.Name, expr, m[2])
			queries++
		}
		for _, panel := range d.Panels {
			for _, target := range panel.Targets {
				checkQuery(t, p, "panel "+panel.Title, grafana.Replace(vars.Replace(target.Expr)), "")
				queries++
			}
		}
		for _, a := range d.Annotations.List {
			if a.Expr == "" {
				continue // Grafana's built-in annotations
			}
			if _, err := p.Query(t.Context(), grafana.Replace(vars.Replace(a.Expr))); err != nil {
				t.Errorf("annotation %s: %s: %v", a.Name, a.Expr, err)
			}
			queries++
		}
	}
	t.Logf("%d dashboard queries, each with data", queries)
}

// checkQuery evaluates expr: it must parse and return data; with label,
// data that carries it.
func checkQuery(t *testing.T, p *promtest.Server, what, expr, label string) {
	t.Helper()
	v, err := p.Query(t.Context(), expr)
	switch {
	case err != nil:
		t.Errorf("%s: %s: %v", what, expr, err)
	case len(v) == 0:
		t.Errorf("%s: %s returns nothing", what, expr)
	case label != "" && v[0].Metric[model.LabelName(label)] == "":
		t.Errorf("%s: %s: no %s in %v", what, expr, label, v)
	}
}
