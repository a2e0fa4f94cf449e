// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"sigs.k8s.io/yaml"
)

// update rewrites the generated files instead of checking them: make
// generate.
var update = flag.Bool("update", false, "rewrite the renders in testdata/, deploy/'s plain manifests and the dashboards")

const deployDir = "../../deploy"

// valueSet is a way to install the chart: its values over the defaults,
// the namespace it goes to.
type valueSet struct {
	name, release, namespace string
	values                   map[string]any
}

// valueSets are the defaults, into kube-system as deploy/ has them, and
// each set of charts/pleg/ci into a namespace of its own.
func valueSets(t *testing.T) []valueSet {
	t.Helper()
	sets := []valueSet{{name: "defaults", release: "pleg", namespace: "kube-system"}}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("charts/pleg/ci: %v %v; want two value sets or more", files, err)
	}
	// A release of another name than the chart's, so that names and
	// labels that should not come from the release are seen not to.
	namespaces := map[string]string{"crio-operator": "pleg-system", "k3s-plain": "monitoring", "mixed-fleet": "pleg-system"}
	releases := map[string]string{"crio-operator": "node-pleg", "k3s-plain": "pleg", "mixed-fleet": "pleg-mixed"}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var values map[string]any
		if err := yaml.Unmarshal(data, &values); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), "-values.yaml")
		ns := namespaces[name]
		if ns == "" {
			ns = "pleg"
		}
		release := releases[name]
		if release == "" {
			release = "pleg"
		}
		sets = append(sets, valueSet{name: name, release: release, namespace: ns, values: values})
	}
	return sets
}

// TestChartLint lints the chart as `helm lint` does, with each value set:
// no warning, no error.
func TestChartLint(t *testing.T) {
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			kv, err := common.ParseKubeVersion(kubeVersion)
			if err != nil {
				t.Fatal(err)
			}
			result := lint.RunAll(chartDir, vs.values, vs.namespace, lint.WithKubeVersion(kv))
			for _, m := range result.Messages {
				if m.Severity > support.InfoSev {
					t.Error(m)
				} else {
					t.Log(m)
				}
			}
		})
	}
}

// TestRenders renders the chart with each value set, as `helm template
// RELEASE charts/pleg -n NAMESPACE -f VALUES` does, and checks the render
// against testdata/NAME.yaml, which test/kube installs on a real API
// server and checks.
func TestRenders(t *testing.T) {
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			r, err := renderChart(vs.release, vs.namespace, vs.values)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range r.objects {
				kinds = append(kinds, o.GetKind())
			}
			t.Logf("%s in %s: %d objects: %s", vs.name, vs.namespace, len(r.objects), strings.Join(kinds, ", "))
			checkGolden(t, filepath.Join("testdata", vs.name+".yaml"), r.golden())
		})
	}
}

// TestDeployIsTheChartRendered checks that deploy/'s plain manifests are
// the chart rendered with its defaults (release pleg in kube-system),
// without the labels that say Helm manages them, and that
// deploy/prometheus/prometheus-rules.yaml is the PrometheusRule's rules
// rendered with the same defaults.
func TestDeployIsTheChartRendered(t *testing.T) {
	r, err := renderChart("pleg", "kube-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, template := range []string{"daemonset.yaml", "rbac.yaml", "networkpolicy.yaml", "admission-policy.yaml"} {
		if r.files[template] == "" {
			t.Errorf("the defaults render no %s", template)
		}
	}
	for template, content := range r.files {
		if isHook(r, template) {
			// Only helm runs hooks: kubectl apply -f deploy/ would run
			// the uninstall hook's Job at once.
			if _, err := os.Stat(filepath.Join(deployDir, template)); err == nil {
				t.Errorf("deploy/%s holds helm hooks, which kubectl apply would run", template)
			}
			continue
		}
		checkGolden(t, filepath.Join(deployDir, template), plainManifest(template, content))
	}
	rules, err := ruleFile(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join(deployDir, "prometheus", "prometheus-rules.yaml"), rules)
}

// isHook reports whether every object of a rendered template is a helm
// hook.
func isHook(r rendered, template string) bool {
	objs, err := parseObjects([]byte(r.files[template]))
	if err != nil || len(objs) == 0 {
		return false
	}
	for _, o := range objs {
		if o.GetAnnotations()["helm.sh/hook"] == "" {
			return false
		}
	}
	return true
}

// ruleFile is the PrometheusRule's spec as a rule file, rendered for
// release pleg in kube-system with values over the defaults.
func ruleFile(values map[string]any) (string, error) {
	values = merge(values, map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	r, err := renderChart("pleg", "kube-system", values)
	if err != nil {
		return "", err
	}
	_, spec, ok := strings.Cut(r.files["prometheusrule.yaml"], "\nspec:\n")
	if !ok {
		return "", fmt.Errorf("prometheusrule.yaml has no spec:\n%s", r.files["prometheusrule.yaml"])
	}
	var b strings.Builder
	b.WriteString(ruleFileHeader)
	for line := range strings.Lines(spec) {
		b.WriteString(strings.TrimPrefix(line, "  "))
	}
	return b.String(), nil
}

// ruleFileHeader starts deploy/prometheus/prometheus-rules.yaml.
const ruleFileHeader = `# Prometheus rules for pleg: a rule file (add it to rule_files). Generated
# from charts/pleg/templates/_rules.tpl with the chart's default values
# (make generate); edit the chart, not this file. The chart installs the
# same rules as a PrometheusRule, with its values: thresholds, for:,
# alerts left out, labels and rules added (docs/kubernetes.md).
#
# Every selector of pleg's series has job="pleg": it keeps them apart from
# the kubelet's, which carry the same names, and from a second release's.
# (PlegAbsent alone also counts the kubelet's up{job="kubelet"} per
# cluster, to say which cluster has no pleg.)
# Aggregations keep cluster, job, node and instance, so that the rules work
# on a Prometheus (or Thanos, Mimir) of many clusters and an Alertmanager
# can route and inhibit by node.
#
# prometheus-rules.test.yaml beside it tests every rule with promtool, and
# test/kube fires them in a real Prometheus scraping real daemons.
`

// merge returns a over b: maps merged key by key, a's other values win.
func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range b {
		out[k] = v
	}
	for k, v := range a {
		am, aok := v.(map[string]any)
		bm, bok := out[k].(map[string]any)
		if aok && bok {
			out[k] = merge(am, bm)
			continue
		}
		out[k] = v
	}
	return out
}

// TestChartCopies checks the chart's copies of the repository's rules
// and dashboard, and the dashboard in deploy/, which package dashboard
// builds.
func TestChartCopies(t *testing.T) {
	copies, err := chartCopies()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range copies {
		checkGolden(t, path, string(want))
	}
}

// checkGolden compares the file at path with want, or with -update
// writes it.
func checkGolden(t *testing.T, path, want string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%v (make generate writes it)", err)
		return
	}
	if string(got) != want {
		t.Errorf("%s is out of date: run make generate (go test ./... -update in test/chart)\n%s", path, firstDiff(string(got), want))
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  have " + gl + "\n  want " + wl
		}
	}
	return ""
}

// TestBadValuesAreRefused renders the chart with values a user might get
// wrong: each is refused with a message that says what, as helm install
// would refuse it, before anything reaches a cluster.
func TestBadValuesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"podMonitors": map[string]any{"enabled": true}}, "podMonitors"},
		{map[string]any{"runtime": map[string]any{"preset": "cri-o"}}, "preset"},
		{map[string]any{"runtime": map[string]any{"socket": "run/crio/crio.sock"}}, "socket"},
		{map[string]any{"podMonitor": map[string]any{"enabeld": true}}, "enabeld"},
		{map[string]any{"image": map[string]any{"digest": "latest"}}, "digest"},
		{map[string]any{"kube": map[string]any{"qps": 0}}, "qps"},
		{map[string]any{"extraArgs": []any{"--relist-threshold=5m"}}, "health.relistThresholdSeconds"},
		{map[string]any{"prometheusRule": map[string]any{"alerts": map[string]any{"PlegDwon": map[string]any{"enabled": false}}}}, "PlegDwon"},
		{map[string]any{"prometheusRule": map[string]any{"alerts": map[string]any{"PlegDown": map[string]any{"for": "five minutes"}}}}, "for"},
		{map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1.5Gi"}}}, "goMemLimit"},
		{map[string]any{"securityContext": "privileged"}, "securityContext"},
	} {
		_, err := renderChart("pleg", "kube-system", tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %v: error %v, want one naming %q", tc.values, err, tc.want)
		}
	}
}
