// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// withMonitoring turns on every object for the Prometheus operator and
// Grafana.
var withMonitoring = map[string]any{
	"podMonitor":     map[string]any{"enabled": true},
	"prometheusRule": map[string]any{"enabled": true},
	"dashboard":      map[string]any{"enabled": true},
}

func mustRender(t *testing.T, release, namespace string, values map[string]any) rendered {
	t.Helper()
	r, err := renderChart(release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r rendered) kind(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

func (r rendered) daemonSet(t *testing.T) (*appsv1.DaemonSet, corev1.Container) {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.kind(t, "DaemonSet").Object, &ds); err != nil {
		t.Fatal(err)
	}
	return &ds, ds.Spec.Template.Spec.Containers[0]
}

// ruleSpec is the part of a PrometheusRule read here.
type ruleSpec struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func (r rendered) rules(t *testing.T) ruleSpec {
	t.Helper()
	var spec ruleSpec
	raw, err := json.Marshal(r.kind(t, "PrometheusRule").Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

var jobMatcher = regexp.MustCompile(`\bjob="([^"]*)"`)

// TestTwoReleasesNeverCollide installs two releases into one namespace,
// as a fleet of two runtimes with a nodeSelector each would: no two
// objects share a kind and name, their pods are told apart by their
// selectors, their dashboards have two uids, and each release's rules and
// dashboard select its own job alone, which its PodMonitor gives its own
// pods' series: no series is judged twice.
func TestTwoReleasesNeverCollide(t *testing.T) {
	a := mustRender(t, "pleg-containerd", "kube-system", withMonitoring)
	b := mustRender(t, "pleg-crio", "kube-system", merge(map[string]any{"runtime": map[string]any{"preset": "crio"}}, withMonitoring))
	names := map[string]bool{}
	for _, o := range a.objects {
		names[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	for _, o := range b.objects {
		if key := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName(); names[key] {
			t.Errorf("both releases render %s", key)
		}
	}
	dsA, _ := a.daemonSet(t)
	dsB, _ := b.daemonSet(t)
	if selects(dsA.Spec.Selector.MatchLabels, dsB.Spec.Template.Labels) || selects(dsB.Spec.Selector.MatchLabels, dsA.Spec.Template.Labels) {
		t.Errorf("a DaemonSet's selector selects the other's pods: %v, %v", dsA.Spec.Selector.MatchLabels, dsB.Spec.Selector.MatchLabels)
	}

	for _, tc := range []struct {
		r     rendered
		ds    *appsv1.DaemonSet
		job   string
		other string
	}{{a, dsA, "pleg-containerd", "pleg-crio"}, {b, dsB, "pleg-crio", "pleg-containerd"}} {
		// The PodMonitor's job: the value of its jobLabel on the pods.
		pm := tc.r.kind(t, "PodMonitor")
		jobLabel, _, _ := unstructured.NestedString(pm.Object, "spec", "jobLabel")
		if got := tc.ds.Spec.Template.Labels[jobLabel]; got != tc.job {
			t.Errorf("release %s: the PodMonitor's jobLabel %q gives job %q, want %q", tc.job, jobLabel, got, tc.job)
		}
		exprs := 0
		for _, g := range tc.r.rules(t).Groups {
			for _, rule := range g.Rules {
				for _, m := range jobMatcher.FindAllStringSubmatch(rule.Expr, -1) {
					exprs++
					// PlegAbsent's reference is the kubelet's series.
					absentRef := rule.Alert == "PlegAbsent" && m[1] == "kubelet"
					if m[1] != tc.job && !absentRef {
						t.Errorf("release %s: rule %s%s selects job=%q", tc.job, rule.Alert, rule.Record, m[1])
					}
				}
			}
		}
		if exprs == 0 {
			t.Errorf("release %s: no rule selects a job", tc.job)
		}
		dash := tc.r.kind(t, "ConfigMap")
		data, _, _ := unstructured.NestedString(dash.Object, "data", "pleg.json")
		var d struct {
			UID string `json:"uid"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatalf("release %s: the dashboard: %v", tc.job, err)
		}
		if !strings.Contains(data, `job=\"`+tc.job+`\"`) || strings.Contains(data, `job=\"`+tc.other+`\"`) || strings.Contains(data, `job=\"pleg\"`) {
			t.Errorf("release %s: the dashboard does not select its own job alone", tc.job)
		}
		if names[d.UID] {
			t.Errorf("both dashboards have uid %q", d.UID)
		}
		names[d.UID] = true
		if len(d.UID) > 40 || d.UID == "" {
			t.Errorf("release %s: dashboard uid %q: Grafana wants 1 to 40 characters", tc.job, d.UID)
		}
	}

	// A release of a long name still gets a uid of 40 characters.
	long := mustRender(t, strings.Repeat("pleg-", 10)+"x", "kube-system", withMonitoring)
	data, _, _ := unstructured.NestedString(long.kind(t, "ConfigMap").Object, "data", "pleg.json")
	var d struct {
		UID string `json:"uid"`
	}
	if err := json.Unmarshal([]byte(data), &d); err != nil || len(d.UID) > 40 {
		t.Errorf("a long release's dashboard uid %q (%v): want 40 characters at most", d.UID, err)
	}
}

// selects reports whether a selector's labels all hold on labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestScrapedOnce: with the PodMonitor on, the pods carry no
// prometheus.io/scrape annotations, which a Prometheus that honours both
// would scrape a second time; without it they do, as set.
func TestScrapedOnce(t *testing.T) {
	for _, tc := range []struct {
		values   map[string]any
		annotate bool
	}{
		{nil, true},
		{map[string]any{"podMonitor": map[string]any{"enabled": true}}, false},
		{map[string]any{"metrics": map[string]any{"scrapeAnnotations": false}}, false},
	} {
		ds, _ := mustRender(t, "pleg", "kube-system", tc.values).daemonSet(t)
		if got := ds.Spec.Template.Annotations["prometheus.io/scrape"] == "true"; got != tc.annotate {
			t.Errorf("values %v: scrape annotations %v, want %v", tc.values, got, tc.annotate)
		}
	}
}

// TestNodeLabel: the PodMonitor gives every series the node's name as
// node (and instance), and every rule keeps node and cluster in its
// aggregations, so that Alertmanager can route and inhibit by node.
func TestNodeLabel(t *testing.T) {
	r := mustRender(t, "pleg", "kube-system", withMonitoring)
	pm := r.kind(t, "PodMonitor")
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	relabelings, _, _ := unstructured.NestedSlice(endpoints[0].(map[string]any), "relabelings")
	targets := map[string]bool{}
	for _, rl := range relabelings {
		m := rl.(map[string]any)
		if src, _ := m["sourceLabels"].([]any); len(src) == 1 && src[0] == "__meta_kubernetes_pod_node_name" {
			targets[m["targetLabel"].(string)] = true
		}
	}
	if !targets["node"] || !targets["instance"] {
		t.Errorf("the PodMonitor's relabelings name the node as %v; want node and instance", targets)
	}
	by := regexp.MustCompile(`\b(?:by|on) \(([^)]*)\)`)
	for _, g := range r.rules(t).Groups {
		for _, rule := range g.Rules {
			for _, m := range by.FindAllStringSubmatch(rule.Expr, -1) {
				labels := strings.Split(strings.ReplaceAll(m[1], " ", ""), ",")
				if m[1] == "" || rule.Alert == "PlegAbsent" {
					if !slices.Contains(labels, "cluster") && m[1] != "" {
						t.Errorf("rule %s: aggregation %q drops cluster", rule.Alert, m[0])
					}
					continue
				}
				if !slices.Contains(labels, "node") || !slices.Contains(labels, "cluster") {
					t.Errorf("rule %s%s: aggregation %q drops node or cluster", rule.Alert, rule.Record, m[0])
				}
			}
		}
	}
}

// TestRulesFollowValues: the health threshold sets both the daemon's
// --relist-threshold and the alerts' thresholds; the values leave alerts
// out, change their for: and severity, add labels, annotations and rule
// groups, and set the runbook URLs.
func TestRulesFollowValues(t *testing.T) {
	r := mustRender(t, "pleg", "kube-system", merge(map[string]any{
		"health": map[string]any{"relistThresholdSeconds": 240},
		"prometheusRule": map[string]any{
			"alerts": map[string]any{
				"PlegDown":       map[string]any{"enabled": false},
				"PlegNotHealthy": map[string]any{"for": "3m", "severity": "page"},
				"PlegRelistSlow": map[string]any{"fraction": 0.25},
			},
			"additionalRuleLabels":      map[string]any{"team": "nodes"},
			"additionalRuleAnnotations": map[string]any{"dashboard": "https://grafana.example.com/d/pleg-fleet"},
			"runbookUrlPattern":         "https://wiki.example.com/pleg/%s",
			"additionalGroups": []any{map[string]any{"name": "site", "rules": []any{
				map[string]any{"alert": "Site", "expr": `up{job="pleg"} == 0`, "for": "1m"},
			}}},
		},
	}, withMonitoring))
	_, c := r.daemonSet(t)
	if !slices.Contains(c.Args, "--relist-threshold=240s") {
		t.Errorf("args %v: want --relist-threshold=240s", c.Args)
	}
	alerts := map[string]int{}
	groups := []string{}
	for _, g := range r.rules(t).Groups {
		groups = append(groups, g.Name)
		for _, rule := range g.Rules {
			if rule.Alert == "" || g.Name == "site" {
				continue
			}
			alerts[rule.Alert]++
			if rule.Labels["team"] != "nodes" || rule.Annotations["dashboard"] == "" {
				t.Errorf("alert %s: labels %v, annotations %v: want the additional ones", rule.Alert, rule.Labels, rule.Annotations)
			}
			if want := "https://wiki.example.com/pleg/" + strings.ToLower(rule.Alert); rule.Annotations["runbook_url"] != want {
				t.Errorf("alert %s: runbook_url %q, want %q", rule.Alert, rule.Annotations["runbook_url"], want)
			}
			switch rule.Alert {
			case "PlegNotHealthy":
				if !strings.HasSuffix(rule.Expr, "> 240") || rule.For != "3m" || rule.Labels["severity"] != "page" {
					t.Errorf("PlegNotHealthy: %q for %s severity %s; want > 240 for 3m severity page", rule.Expr, rule.For, rule.Labels["severity"])
				}
			case "PlegRelistSlow":
				if !strings.HasSuffix(strings.TrimSpace(rule.Expr), ">= 60") {
					t.Errorf("PlegRelistSlow: %q, want a quarter of 240 s", rule.Expr)
				}
			case "PlegRelistNearThreshold":
				if !strings.HasSuffix(strings.TrimSpace(rule.Expr), "> 120") {
					t.Errorf("PlegRelistNearThreshold: %q, want half of 240 s", rule.Expr)
				}
			}
		}
	}
	if alerts["PlegDown"] != 0 || alerts["PlegNotHealthy"] != 1 || len(alerts) != 14 {
		t.Errorf("alerts %v: want the 15 but PlegDown", alerts)
	}
	if !slices.Contains(groups, "site") {
		t.Errorf("groups %v: want the additional group site", groups)
	}
}

// TestContainerValues: the runtime endpoint every pleg command in the pod
// uses, the securityContext merged over the hardened default, GOMEMLIMIT
// derived from the memory limit, a registry mirror, labels on every
// object, the ServiceAccount's annotations, extra volumes.
func TestContainerValues(t *testing.T) {
	for _, tc := range []struct {
		preset, socket, endpoint string
	}{
		{"containerd", "", "unix:///run/containerd/containerd.sock"},
		{"crio", "", "unix:///var/run/crio/crio.sock"},
		{"containerd", "/run/k3s/containerd/containerd.sock", "unix:///run/k3s/containerd/containerd.sock"},
		{"auto", "", "auto"},
	} {
		ds, c := mustRender(t, "pleg", "kube-system", map[string]any{"runtime": map[string]any{"preset": tc.preset, "socket": tc.socket}}).daemonSet(t)
		if !slices.Contains(c.Args, "--runtime-endpoint="+tc.endpoint) || env(c, "CONTAINER_RUNTIME_ENDPOINT") != tc.endpoint {
			t.Errorf("preset %s socket %q: args %v, CONTAINER_RUNTIME_ENDPOINT %q; want %s in both", tc.preset, tc.socket, c.Args, env(c, "CONTAINER_RUNTIME_ENDPOINT"), tc.endpoint)
		}
		var hostPaths []string
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.HostPath != nil && strings.HasPrefix(v.Name, "cri-") {
				hostPaths = append(hostPaths, v.HostPath.Path+" "+string(*v.HostPath.Type))
			}
		}
		want := []string{strings.TrimPrefix(tc.endpoint, "unix://") + " Socket"}
		if tc.endpoint == "auto" {
			// Each directory the auto endpoint tries, created where
			// absent so that the pod starts on every node.
			want = []string{"/run/containerd DirectoryOrCreate", "/run/crio DirectoryOrCreate", "/var/run/crio DirectoryOrCreate", "/run/k3s/containerd DirectoryOrCreate"}
		}
		if !slices.Equal(hostPaths, want) {
			t.Errorf("preset %s: the runtime's host paths %v, want %v", tc.preset, hostPaths, want)
		}
	}

	r := mustRender(t, "pleg", "kube-system", map[string]any{
		"securityContext":      map[string]any{"seLinuxOptions": map[string]any{"type": "spc_t"}},
		"resources":            map[string]any{"limits": map[string]any{"memory": "1Gi"}},
		"global":               map[string]any{"imageRegistry": "mirror.example.com/cache"},
		"commonLabels":         map[string]any{"team": "nodes"},
		"serviceAccount":       map[string]any{"annotations": map[string]any{"iam.gke.io/gcp-service-account": "pleg@p.iam.gserviceaccount.com"}},
		"extraVolumes":         []any{map[string]any{"name": "extra", "emptyDir": map[string]any{}}},
		"extraVolumeMounts":    []any{map[string]any{"name": "extra", "mountPath": "/extra"}},
		"revisionHistoryLimit": 2,
		"nameOverride":         "node-pleg",
	})
	ds, c := r.daemonSet(t)
	sc := c.SecurityContext
	if sc == nil || sc.SELinuxOptions == nil || sc.SELinuxOptions.Type != "spc_t" ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("securityContext %+v: want spc_t over the hardened default", sc)
	}
	if got := env(c, "GOMEMLIMIT"); got != "921MiB" {
		t.Errorf("GOMEMLIMIT %q with a 1Gi limit, want 921MiB (90%%)", got)
	}
	if c.Image != "mirror.example.com/cache/plegkit/pleg:v0.1.0" {
		t.Errorf("image %q, want the mirror's", c.Image)
	}
	if ds.Spec.RevisionHistoryLimit == nil || *ds.Spec.RevisionHistoryLimit != 2 {
		t.Errorf("revisionHistoryLimit %v, want 2", ds.Spec.RevisionHistoryLimit)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "extra" }) ||
		!slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "extra" }) {
		t.Error("no extra volume or mount")
	}
	for _, o := range r.objects {
		if o.GetLabels()["team"] != "nodes" || o.GetLabels()["app.kubernetes.io/name"] != "node-pleg" {
			t.Errorf("%s %s: labels %v, want team=nodes and the name override", o.GetKind(), o.GetName(), o.GetLabels())
		}
		// pleg's own ServiceAccount; the uninstall hook's has none of its
		// annotations.
		hook := o.GetAnnotations()["helm.sh/hook"] != ""
		if o.GetKind() == "ServiceAccount" && !hook && o.GetAnnotations()["iam.gke.io/gcp-service-account"] == "" {
			t.Errorf("ServiceAccount: annotations %v", o.GetAnnotations())
		}
	}
	if ds.Spec.Template.Labels["team"] != "nodes" {
		t.Errorf("pod labels %v: want commonLabels", ds.Spec.Template.Labels)
	}

	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"goMemLimit": "100MiB"}, "100MiB"},
		{map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "500M"}}}, "429MiB"},
		{map[string]any{"resources": map[string]any{"limits": nil}}, ""},
	} {
		_, c := mustRender(t, "pleg", "kube-system", tc.values).daemonSet(t)
		if got := env(c, "GOMEMLIMIT"); got != tc.want {
			t.Errorf("values %v: GOMEMLIMIT %q, want %q", tc.values, got, tc.want)
		}
	}
}

// TestKubeletValues: kubelet.readPLEG reads the kubelet's own PLEG from
// its port on the node's address (NODE_IP from the downward API), which
// the ClusterRole's get on nodes/metrics allows; its TLS is verified
// against caFile, or the cluster's CA, or not at all; without
// kube.report, whose token it would send, there is no reading, nor the
// rule.
func TestKubeletValues(t *testing.T) {
	// metricsRule: a ClusterRole's get on nodes/metrics.
	metricsRule := func(r rendered) bool {
		for _, o := range r.objects {
			if o.GetKind() != "ClusterRole" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, rule := range rules {
				m, _ := rule.(map[string]any)
				if fmt.Sprint(m["resources"]) == "[nodes/metrics]" && fmt.Sprint(m["verbs"]) == "[get]" {
					return true
				}
			}
		}
		return false
	}
	for _, tc := range []struct {
		name    string
		values  map[string]any
		read    bool
		tlsArgs []string
	}{
		{"defaults", nil, true, []string{"--kubelet-insecure-skip-tls-verify"}},
		{"the cluster's CA", map[string]any{"kubelet": map[string]any{"insecureSkipTLSVerify": false}}, true, nil},
		{"a CA file", map[string]any{"kubelet": map[string]any{"caFile": "/etc/kubelet-ca/ca.crt"}}, true,
			[]string{"--kubelet-ca-file=/etc/kubelet-ca/ca.crt"}},
		{"off", map[string]any{"kubelet": map[string]any{"readPLEG": false}}, false, nil},
		{"without reporting", map[string]any{"kube": map[string]any{"report": false}}, false, nil},
	} {
		r := mustRender(t, "pleg", "kube-system", tc.values)
		_, c := r.daemonSet(t)
		var kubeletArgs []string
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--kubelet") {
				kubeletArgs = append(kubeletArgs, a)
			}
		}
		want := []string(nil)
		if tc.read {
			want = append([]string{"--kubelet=auto"}, tc.tlsArgs...)
		}
		if !slices.Equal(kubeletArgs, want) {
			t.Errorf("%s: kubelet args %v, want %v", tc.name, kubeletArgs, want)
		}
		nodeIP := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
		})
		if nodeIP != tc.read {
			t.Errorf("%s: NODE_IP from status.hostIP %v, want %v", tc.name, nodeIP, tc.read)
		}
		if got := metricsRule(r); got != tc.read {
			t.Errorf("%s: a ClusterRole's get on nodes/metrics %v, want %v", tc.name, got, tc.read)
		}
	}
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestKubeVersions: the chart installs on clusters from 1.19, the oldest
// its templates allow, with the admission policy off; the policy, which
// needs 1.30, is refused on an older cluster with a message that says
// what to set, rather than left out silently.
func TestKubeVersions(t *testing.T) {
	off := map[string]any{"admissionPolicy": map[string]any{"enabled": false}}
	if _, err := renderChartFor("v1.19.0", "pleg", "kube-system", off); err != nil {
		t.Errorf("1.19 without the admission policy: %v", err)
	}
	_, err := renderChartFor("v1.29.4", "pleg", "kube-system", nil)
	if err == nil || !strings.Contains(err.Error(), "admissionPolicy.enabled=false") {
		t.Errorf("1.29 with the admission policy: error %v, want one saying to set admissionPolicy.enabled=false", err)
	}
	r, err := renderChartFor("v1.30.0", "pleg", "kube-system", nil)
	if err != nil || r.files["admission-policy.yaml"] == "" {
		t.Errorf("1.30: %v, policy rendered %v", err, r.files["admission-policy.yaml"] != "")
	}
}

// TestNotes: what helm install prints picks the paged node's pod by its
// node, not any pod of the DaemonSet, and writes the doctor's HTML report
// to standard output, the container's root being read-only.
func TestNotes(t *testing.T) {
	for _, values := range []map[string]any{nil, {"runtime": map[string]any{"preset": "auto"}}, withMonitoring} {
		notes := mustRender(t, "pleg-crio", "pleg-system", values).notes
		for _, want := range []string{
			"--field-selector spec.nodeName=$NODE",
			"-l app.kubernetes.io/instance=pleg-crio",
			"/pleg doctor --html - >",
			"CONTAINER_RUNTIME_ENDPOINT",
		} {
			if !strings.Contains(notes, want) {
				t.Errorf("values %v: NOTES.txt lacks %q:\n%s", values, want, notes)
			}
		}
		if strings.Contains(notes, "ds/") || strings.Contains(notes, "hostNetwork") {
			t.Errorf("values %v: NOTES.txt names ds/ or hostNetwork:\n%s", values, notes)
		}
	}
}
