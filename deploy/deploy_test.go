// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package deploy holds the deployment files: a DaemonSet and its
// NetworkPolicy, a systemd unit and Prometheus rules (make image builds
// the image, with hack/image). Its test checks that they parse and say
// what the daemon needs.
package deploy

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/internal/testing/promtest"
	"github.com/plegkit/pleg/kubeletpleg"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDaemonSet(t *testing.T) {
	var ds appsv1.DaemonSet
	// Strict: a misspelt field fails instead of vanishing.
	if err := yaml.UnmarshalStrict(read(t, "daemonset.yaml"), &ds); err != nil {
		t.Fatalf("daemonset.yaml does not parse into a DaemonSet: %v", err)
	}
	if ds.APIVersion != "apps/v1" || ds.Kind != "DaemonSet" || ds.Name == "" || ds.Namespace == "" {
		t.Errorf("type or name missing: %s %s %s/%s", ds.APIVersion, ds.Kind, ds.Namespace, ds.Name)
	}
	sel := ds.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 {
		t.Fatal("no selector")
	}
	for k, v := range sel.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template's labels", k, v)
		}
	}
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9847" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("Prometheus scrape annotations: %v", ann)
	}

	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image == "" || len(c.Args) == 0 || c.Args[0] != "run" {
		t.Errorf("container image %q args %v: want an image running `pleg run`", c.Image, c.Args)
	}
	// Only the metrics and probes face the pod network; the API is a
	// unix socket on a host directory.
	if !slices.Contains(c.Args, "--metrics-listen=:9847") || !slices.Contains(c.Args, "--listen=unix:///run/pleg/pleg.sock") {
		t.Errorf("args %v: want the API on unix:///run/pleg/pleg.sock and only --metrics-listen on port 9847", c.Args)
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--listen=") && !strings.HasPrefix(a, "--listen=unix://") {
			t.Errorf("arg %s: the whole API would face the pod network", a)
		}
	}
	for path, probe := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/livez": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %+v: want GET %s on the metrics port", probe, path)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9847 {
		t.Errorf("ports %+v", c.Ports)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}
	memLimit := goMemLimit(t, c.Env)
	if limit := c.Resources.Limits.Memory().Value(); memLimit <= 0 || memLimit >= limit {
		t.Errorf("GOMEMLIMIT %d bytes: want it set below the memory limit, %d", memLimit, limit)
	}
	// A token is for reporting into the Kubernetes API alone (rbac_test.go
	// checks the role behind it).
	inCluster := slices.Contains(c.Args, "--in-cluster")
	if token := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken; token != inCluster {
		t.Errorf("the pod mounts a service account token: %v, reporting with --in-cluster: %v; want a token exactly for reporting", token, inCluster)
	}
	if sc := pod.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("want seccompProfile RuntimeDefault")
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v: want a read-only root, no privilege escalation, every capability dropped", sc)
	}
	apiMounted := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.HostPath != nil && v.HostPath.Path == "/run/pleg" && slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == v.Name && m.MountPath == "/run/pleg" && !m.ReadOnly
		})
	})
	if !apiMounted {
		t.Error("the API socket's directory must be the host's /run/pleg, mounted writable")
	}

	var socketVolume string
	for _, v := range pod.Volumes {
		if v.HostPath != nil && v.HostPath.Path == "/run/containerd/containerd.sock" {
			socketVolume = v.Name
			if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathSocket {
				t.Errorf("volume %s: want hostPath type Socket", v.Name)
			}
		}
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == socketVolume && m.ReadOnly && m.MountPath == "/run/containerd/containerd.sock"
	})
	if socketVolume == "" || !mounted {
		t.Error("the host's CRI socket must be mounted read-only where --runtime-endpoint points")
	}
}

// goMemLimit parses the GOMEMLIMIT of env, in Go's notation (a number of
// bytes with an optional B, KiB, MiB, GiB or TiB).
func goMemLimit(t *testing.T, env []corev1.EnvVar) int64 {
	t.Helper()
	for _, e := range env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		v, unit := e.Value, int64(1)
		for i, suffix := range []string{"TiB", "GiB", "MiB", "KiB", "B"} {
			if n, ok := strings.CutSuffix(v, suffix); ok {
				v, unit = n, int64(1)<<(10*(4-i))
				break
			}
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("GOMEMLIMIT %q: %v", e.Value, err)
		}
		return n * unit
	}
	return 0
}

func TestNetworkPolicy(t *testing.T) {
	var np networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(read(t, "networkpolicy.yaml"), &np); err != nil {
		t.Fatalf("networkpolicy.yaml does not parse into a NetworkPolicy: %v", err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(read(t, "daemonset.yaml"), &ds); err != nil {
		t.Fatal(err)
	}
	if np.APIVersion != "networking.k8s.io/v1" || np.Kind != "NetworkPolicy" || np.Namespace != ds.Namespace {
		t.Errorf("type or namespace: %s %s %s, want the DaemonSet's namespace %s", np.APIVersion, np.Kind, np.Namespace, ds.Namespace)
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("podSelector %s=%s does not select the DaemonSet's pods", k, v)
		}
	}
	if len(np.Spec.PodSelector.MatchLabels) == 0 || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("want an Ingress policy selecting the pleg pods: %+v", np.Spec)
	}
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			t.Error("an ingress rule open to every source")
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.String() != ds.Spec.Template.Spec.Containers[0].Ports[0].Name {
				t.Errorf("ingress port %v: want only the metrics port", p.Port)
			}
		}
		if len(rule.Ports) == 0 {
			t.Error("an ingress rule open on every port")
		}
	}
}

func TestPrometheusRules(t *testing.T) {
	r, err := promtest.ParseRules(read(t, filepath.Join(rulesDir, "prometheus-rules.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	known := exportedMetrics(t)
	recorded := map[string]bool{}
	alerts := map[string]string{}
	name := regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if (rule.Record == "") == (rule.Alert == "") || rule.Expr == "" {
				t.Errorf("group %s: a rule needs an expr and exactly one of record and alert: %+v", g.Name, rule)
			}
			if rule.Record != "" {
				recorded[rule.Record] = true
			}
			if rule.Alert != "" {
				alerts[rule.Alert] = rule.Expr
				checkAlert(t, rule)
			}
			// Ranges and subqueries ("[5m]", "[2m:]") hold no names.
			for _, series := range name.FindAllString(brackets.ReplaceAllString(rule.Expr, ""), -1) {
				if strings.Contains(series, ":") {
					if !recorded[series] {
						t.Errorf("rule %s%s uses %s, which no rule records", rule.Record, rule.Alert, series)
					}
					continue
				}
				if !strings.HasPrefix(series, "kubelet_") && !strings.HasPrefix(series, "pleg_") {
					continue // a function or label
				}
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(series, "_bucket"), "_sum"), "_count")
				if !known[base] {
					t.Errorf("rule %s%s uses %s, which pleg does not export", rule.Record, rule.Alert, series)
				}
			}
			// Every selector of a series: pleg's carry the kubelet's
			// names, and up is every job's. PlegAbsent's reference
			// series alone is another job's (the chart's
			// prometheusRule.absentReference).
			for _, sel := range selector.FindAllStringSubmatch(rule.Expr, -1) {
				if rule.Alert == "PlegAbsent" && sel[0] != "" && strings.TrimLeft(sel[0], " (") == absentReference {
					continue
				}
				if !strings.Contains(sel[2], `job="pleg"`) {
					t.Errorf("rule %s%s selects %s without job=\"pleg\": it would mix in other jobs' series", rule.Record, rule.Alert, sel[1])
				}
			}
		}
	}
	if !strings.Contains(alerts["PlegDurationHigh"], ">= 10") {
		t.Errorf("PlegDurationHigh = %q: want the stock KubeletPlegDurationHigh threshold of 10 s", alerts["PlegDurationHigh"])
	}
	if !strings.Contains(alerts["PlegNotHealthy"], "time() - kubelet_pleg_last_seen_seconds") {
		t.Errorf("PlegNotHealthy = %q: want the staleness of kubelet_pleg_last_seen_seconds", alerts["PlegNotHealthy"])
	}
	for _, want := range []string{"PlegDown", "PlegAbsent", "PlegKubeReportsFailing", "PlegRuntimeNotAnswering", "PlegRuntimeSlow", "PlegPodStatusHung", "PlegRelistNearThreshold"} {
		if alerts[want] == "" {
			t.Errorf("no alert %s", want)
		}
	}
}

var brackets = regexp.MustCompile(`\[[^\]]*\]`)

// absentReference is the series PlegAbsent counts per cluster, the
// chart's default prometheusRule.absentReference.
const absentReference = `up{job="kubelet"}`

// selector matches a series and its label matchers: kubelet_*, pleg_*
// and up, with or without braces.
var selector = regexp.MustCompile(`(?:^|[^:\w])((?:kubelet|pleg)_\w*|up\b)(\{[^}]*\})?`)

// checkAlert checks what a receiver of the alert gets: a severity, a
// summary, a description, and a runbook in this repository (whose section
// TestRunbookURLs, in test/docs, checks exists).
func checkAlert(t *testing.T, rule promtest.RuleSpec) {
	t.Helper()
	if rule.For == "" {
		t.Errorf("alert %s: no for", rule.Alert)
	}
	if !slices.Contains([]string{"critical", "warning", "info"}, rule.Labels["severity"]) {
		t.Errorf("alert %s: severity %q, want critical, warning or info", rule.Alert, rule.Labels["severity"])
	}
	for _, a := range []string{"summary", "description", "runbook_url"} {
		if rule.Annotations[a] == "" {
			t.Errorf("alert %s: no %s", rule.Alert, a)
		}
	}
	if u := rule.Annotations["runbook_url"]; !strings.HasPrefix(u, repoURL+"/") {
		t.Errorf("alert %s: runbook_url %q is not in %s", rule.Alert, u, repoURL)
	}
}

// repoURL is where the repository is published: runbook URLs point into
// it.
const repoURL = "https://github.com/plegkit/pleg"

// exportedMetrics are the names of the daemon's PLEG, runtime, journal
// and reporting metrics: every collector's descriptions as it registers,
// so that a vector or a gauge without a value yet is known too.
func exportedMetrics(t *testing.T) map[string]bool {
	// The daemon as the chart has pleg run assemble it, reporting into
	// Kubernetes and reading the kubelet: its registry holds every
	// collector of the generator, the runtime's operations, the journal,
	// the reporter, the kubelet's reading and the daemon's own.
	d, err := daemon.New(daemon.Config{
		Runtime:   fakeruntime.New(),
		Listen:    "127.0.0.1:0",
		Generator: pleg.Options{Mode: pleg.ModeGeneric},
		Kube:      &kubereport.Config{NodeName: "node-1", Client: fake.NewClientset()},
		Kubelet:   unreadKubelet{},
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // assembled, not run: Run only closes what New opened
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	reg := &describing{Registerer: prometheus.NewRegistry(), names: map[string]bool{}}
	if err := reg.Register(d.Registry); err != nil {
		t.Fatal(err)
	}
	return reg.names
}

// unreadKubelet is a kubelet whose metrics are never read: the daemon
// registers the reading's metrics all the same.
type unreadKubelet struct{}

func (unreadKubelet) Read(context.Context) kubeletpleg.Reading {
	return kubeletpleg.Reading{Error: "not read in this test"}
}

// describing is a Registerer that notes the name of every metric a
// collector describes as it registers.
type describing struct {
	prometheus.Registerer
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return d.Registerer.Register(c)
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// noStatus is a kubereport.Source with nothing to say.
func TestSystemdUnit(t *testing.T) {
	sections := map[string]map[string]string{}
	var current string
	sc := bufio.NewScanner(strings.NewReader(string(read(t, "pleg.service"))))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			current = strings.Trim(line, "[]")
			sections[current] = map[string]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || current == "" {
				t.Fatalf("pleg.service: bad line %q", line)
			}
			sections[current][k] = v
		}
	}
	exec := strings.Fields(sections["Service"]["ExecStart"])
	if len(exec) < 2 || !strings.HasPrefix(exec[0], "/") || exec[1] != "run" {
		t.Errorf("ExecStart %v: want an absolute path to pleg, then run", exec)
	}
	if sections["Service"]["Restart"] == "" || sections["Install"]["WantedBy"] == "" || sections["Unit"]["After"] == "" {
		t.Errorf("want Restart, After and WantedBy set: %v", sections)
	}
}
