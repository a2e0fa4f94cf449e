// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/internal/testing/promtest"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// chartRenders are the chart's renders that test/chart checks against
// helm's own rendering: testdata/NAME.yaml, one per value set.
const chartRenders = "../chart/testdata"

// chartDir is the chart itself.
const chartDir = "../../charts/pleg"

// valueSet is a render of the chart, and what it must install.
type valueSet struct {
	name, namespace string
	// socket is the runtime socket the pods must mount ("": the preset
	// auto, which mounts the directories of every socket it tries);
	// image the image they run.
	socket, image string
	// operator: the PodMonitor, PrometheusRule and dashboard are on;
	// tunedRules: the rules are not the defaults (deploy/prometheus's).
	operator, report, networkPolicy, stateDir, tunedRules bool
}

// The documented presets' sockets.
const (
	containerdSocket = "/run/containerd/containerd.sock"
	crioSocket       = "/var/run/crio/crio.sock"
)

// valueSets are the defaults and the sets of charts/pleg/ci: CRI-O nodes
// with the Prometheus operator; containerd at k3s's socket without the
// operator or reporting, the image pinned by digest; a mixed fleet (the
// runtime found on each node) with a registry mirror, TLS scrapes and
// tuned rules.
func valueSets(t *testing.T) []valueSet {
	image := "ghcr.io/plegkit/pleg:" + chartMeta(t).AppVersion
	return []valueSet{
		{name: "defaults", namespace: "kube-system", socket: containerdSocket, image: image, report: true, networkPolicy: true, stateDir: true},
		{name: "crio-operator", namespace: "pleg-system", socket: crioSocket, image: image, operator: true, report: true, networkPolicy: true, stateDir: true},
		{name: "k3s-plain", namespace: "monitoring", socket: "/run/k3s/containerd/containerd.sock",
			image: "ghcr.io/plegkit/pleg@sha256:" + strings.Repeat("ab", 32)},
		{name: "mixed-fleet", namespace: "pleg-system", image: "registry.example.com/mirror/plegkit/pleg:" + chartMeta(t).AppVersion,
			operator: true, report: true, networkPolicy: true, stateDir: true, tunedRules: true},
	}
}

// render is a render of the chart: the objects it holds, and apart from
// them its helm hooks (the uninstall hook), which only helm creates, and
// only as it uninstalls.
type render struct{ objects, hooks []*unstructured.Unstructured }

func readRender(t *testing.T, name string) render {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartRenders, name+".yaml"))
	if err != nil {
		t.Fatalf("%v (test/chart renders it: make generate)", err)
	}
	var r render
	for _, doc := range splitDocuments(data) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch u := (&unstructured.Unstructured{Object: obj}); {
		case u.GetKind() == "":
		case u.GetAnnotations()["helm.sh/hook"] != "":
			r.hooks = append(r.hooks, u)
		default:
			r.objects = append(r.objects, u)
		}
	}
	return r
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for line := range bytes.Lines(data) {
		if bytes.Equal(bytes.TrimRight(line, " \r\n"), []byte("---")) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

// kind returns the objects of kind.
func (r render) kind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestChartInstalls applies each render of the chart to the API server
// with server-side apply (a dry run, unknown fields refused), with the
// Prometheus operator's CRDs installed from their published YAML, and
// checks what a node agent must get right.
func TestChartInstalls(t *testing.T) {
	srv, cs := apiServer(t)
	installOperatorCRDs(t, srv)
	dyn, err := dynamic.NewForConfig(srv.Config(kubetest.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	checkKubeVersion(t)
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			r := readRender(t, vs.name)
			t.Logf("%s: %d objects: %s", vs.name, len(r.objects), kinds(r.objects))
			ensureNamespace(t, cs, vs.namespace)
			dryRunApply(t, cs, dyn, slices.Concat(r.objects, r.hooks))
			checkInstall(t, vs, r)
			checkUninstallHook(t, vs, r)
		})
	}
}

// checkKubeVersion checks the chart's kubeVersion against the API
// server's, the version of k8s.io/kubernetes this module builds it from
// (its /version says v0.0.0, lacking a release build's stamps): helm
// install refuses a cluster outside it.
func checkKubeVersion(t *testing.T) {
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	server := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v(\d+\.\d+\.\d+)`).FindSubmatch(gomod)
	chart, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	floor := regexp.MustCompile(`(?m)^kubeVersion: ">=(\d+\.\d+\.\d+)-0"$`).FindSubmatch(chart)
	if server == nil || floor == nil {
		t.Fatal(`want k8s.io/kubernetes in go.mod and kubeVersion: ">=X.Y.Z-0" in Chart.yaml`)
	}
	if version.MustParseGeneric(string(server[1])).LessThan(version.MustParseGeneric(string(floor[1]))) {
		t.Errorf("the test's API server %s is older than the chart's kubeVersion %s", server[1], floor[1])
	}
}

// chartMeta is what Chart.yaml says.
func chartMeta(t *testing.T) (meta struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	return meta
}

func kinds(objs []*unstructured.Unstructured) string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetKind())
	}
	return strings.Join(ks, ", ")
}

func ensureNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Apply(context.Background(),
		corev1ac.Namespace(ns), metav1.ApplyOptions{FieldManager: "pleg-test"})
	if err != nil {
		t.Fatal(err)
	}
}

// dryRunApply applies objs with server-side apply as a dry run, with
// strict field validation: a field the API server does not know (a typo
// in a template, a CRD's schema not followed) is an error.
func dryRunApply(t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	force := true
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: %v", gvk, obj.GetName(), err)
			continue
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if obj.GetNamespace() != "" {
			r = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager: "pleg-test", Force: &force, DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict",
		})
		if err != nil {
			t.Errorf("server-side apply (dry run) of %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// into converts an object into its typed form, strictly.
func into[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &out, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return &out
}

func one(t *testing.T, r render, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := r.kind(kind)
	if len(objs) != 1 {
		t.Fatalf("%d %s objects, want 1", len(objs), kind)
	}
	return objs[0]
}

// checkInstall checks the points the chart must get right for vs.
func checkInstall(t *testing.T, vs valueSet, r render) {
	ds := into[appsv1.DaemonSet](t, one(t, r, "DaemonSet"))
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	clusterScoped := []string{"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	for _, o := range r.objects {
		if !slices.Contains(clusterScoped, o.GetKind()) && o.GetNamespace() != vs.namespace {
			t.Errorf("%s %s in namespace %q, want the release's %q", o.GetKind(), o.GetName(), o.GetNamespace(), vs.namespace)
		}
	}
	checkSocket(t, vs, pod, c)
	if pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v: want kubernetes.io/os: linux", pod.NodeSelector)
	}
	checkImage(t, vs, c)
	checkProbes(t, ds, c)
	checkReporting(t, vs, r, pod, c)
	checkNetworkPolicy(t, vs, r, ds)
	if vs.operator {
		job := checkPodMonitor(t, r, ds)
		if !vs.tunedRules {
			checkPrometheusRule(t, r, job)
		}
		checkDashboardConfigMap(t, r, job)
	} else {
		for _, k := range []string{"PodMonitor", "PrometheusRule", "ConfigMap"} {
			if n := len(r.kind(k)); n != 0 {
				t.Errorf("%d %s objects without the operator's values", n, k)
			}
		}
	}
}

// checkSocket: the runtime's socket, from the preset or the value, is
// mounted read-only from the host at the path --runtime-endpoint names,
// which CONTAINER_RUNTIME_ENDPOINT names too for pleg doctor in the pod;
// with the preset auto, the directories of every socket it tries, created
// where absent so that the pod starts on every node.
func checkSocket(t *testing.T, vs valueSet, pod corev1.PodSpec, c corev1.Container) {
	endpoint := "auto"
	if vs.socket != "" {
		endpoint = "unix://" + vs.socket
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "CONTAINER_RUNTIME_ENDPOINT" && e.Value == endpoint }) {
		t.Errorf("env %+v: want CONTAINER_RUNTIME_ENDPOINT=%s", c.Env, endpoint)
	}
	if vs.socket == "" {
		if !slices.Contains(c.Args, "--runtime-endpoint=auto") {
			t.Errorf("args %v: want --runtime-endpoint=auto", c.Args)
		}
		for _, dir := range []string{"/run/containerd", "/run/crio", "/var/run/crio", "/run/k3s/containerd"} {
			vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool {
				return v.HostPath != nil && v.HostPath.Path == dir && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectoryOrCreate
			})
			if vol < 0 || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == pod.Volumes[vol].Name && m.MountPath == dir && m.ReadOnly
			}) {
				t.Errorf("volumes %+v: want the host's %s, DirectoryOrCreate, mounted read-only", pod.Volumes, dir)
			}
		}
		return
	}
	if !slices.Contains(c.Args, "--runtime-endpoint=unix://"+vs.socket) {
		t.Errorf("args %v: want --runtime-endpoint=unix://%s", c.Args, vs.socket)
	}
	vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.HostPath != nil && v.HostPath.Path == vs.socket && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathSocket
	})
	if vol < 0 {
		t.Fatalf("volumes %+v: want the host's %s, of type Socket", pod.Volumes, vs.socket)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == pod.Volumes[vol].Name && m.MountPath == vs.socket && m.ReadOnly
	})
	if !mounted {
		t.Errorf("mounts %+v: want %s mounted read-only at %s", c.VolumeMounts, pod.Volumes[vol].Name, vs.socket)
	}
	stateDir := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == "/var/lib/pleg" })
	if stateDir != vs.stateDir || slices.Contains(c.Args, "--state-dir=/var/lib/pleg") != vs.stateDir {
		t.Errorf("state directory mounted %v, args %v; want it exactly with stateDir.enabled (%v)", stateDir, c.Args, vs.stateDir)
	}
}

// checkImage: the image is the chart's appVersion, or a digest, with a
// pull policy.
func checkImage(t *testing.T, vs valueSet, c corev1.Container) {
	if c.Image != vs.image || chartMeta(t).AppVersion == "" || strings.HasSuffix(c.Image, ":latest") {
		t.Errorf("image %q, want %q (the chart's appVersion, or the digest)", c.Image, vs.image)
	}
	if c.ImagePullPolicy == "" {
		t.Error("no imagePullPolicy")
	}
}

// checkProbes: readiness (/readyz: pleg serves, whatever the runtime's
// health) does not turn on one slow answer, which would count the pod
// unavailable and hold a maxUnavailable rollout; liveness asks /livez,
// which a sick runtime does not fail.
func checkProbes(t *testing.T, ds *appsv1.DaemonSet, c corev1.Container) {
	rp, lp := c.ReadinessProbe, c.LivenessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" || rp.HTTPGet.Port.String() != "metrics" {
		t.Fatalf("readiness probe %+v: want GET /readyz on the metrics port", rp)
	}
	if rp.FailureThreshold < 2 || rp.TimeoutSeconds < 2 {
		t.Errorf("readiness probe: failureThreshold %d, timeoutSeconds %d; one slow answer must not make the pod unready", rp.FailureThreshold, rp.TimeoutSeconds)
	}
	if lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/livez" || lp.FailureThreshold < 2 || lp.TimeoutSeconds < 2 {
		t.Errorf("liveness probe %+v: want GET /livez, tolerant of a slow answer", lp)
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxUnavailable == nil {
		t.Errorf("update strategy %+v: want a rolling update with maxUnavailable", ds.Spec.UpdateStrategy)
	}
}

// checkReporting: a token and a role exactly when reporting; with them,
// the kubelet's own PLEG read from its port on the node's address
// (kubelet.readPLEG, on in every set that reports), which the role's get
// on nodes/metrics allows.
func checkReporting(t *testing.T, vs valueSet, r render, pod corev1.PodSpec, c corev1.Container) {
	token := pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken
	if token != vs.report || slices.Contains(c.Args, "--in-cluster") != vs.report {
		t.Errorf("token mounted %v, args %v; want --in-cluster and a token exactly when reporting (%v)", token, c.Args, vs.report)
	}
	nodeIP := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
	})
	if nodeIP != vs.report || slices.Contains(c.Args, "--kubelet=auto") != vs.report {
		t.Errorf("NODE_IP from status.hostIP %v, args %v; want both, and --kubelet=auto, exactly when reporting (%v)", nodeIP, c.Args, vs.report)
	}
	roles := r.kind("ClusterRole")
	if !vs.report {
		if len(roles) != 0 || len(r.kind("ValidatingAdmissionPolicy")) != 0 {
			t.Error("a ClusterRole or an admission policy without reporting")
		}
		return
	}
	if len(roles) != 1 || len(r.kind("ClusterRoleBinding")) != 1 || len(r.kind("ServiceAccount")) != 1 {
		t.Fatalf("RBAC objects: %s", kinds(r.objects))
	}
	role := into[rbacv1.ClusterRole](t, roles[0])
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
	}
	if fmt.Sprint(role.Rules) != fmt.Sprint(want) {
		t.Errorf("role rules %v, want exactly %v", role.Rules, want)
	}
	sa := into[corev1.ServiceAccount](t, one(t, r, "ServiceAccount"))
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("the pods run as %s, the chart's ServiceAccount is %s", pod.ServiceAccountName, sa.Name)
	}
	checkAdmissionPolicies(t, r, sa)
}

// checkUninstallHook: with reporting, helm uninstall's pre-delete hook is
// a Job running the image's pleg uninstall on this DaemonSet, as a
// ServiceAccount of its own that may delete this DaemonSet alone and
// touch nodes' status alone, and its pod is none of the DaemonSet's;
// every object of it is deleted once it succeeded.
func checkUninstallHook(t *testing.T, vs valueSet, r render) {
	if !vs.report {
		if len(r.hooks) != 0 {
			t.Errorf("hooks without reporting: %s", kinds(r.hooks))
		}
		return
	}
	hooks := render{objects: r.hooks}
	for _, h := range r.hooks {
		a := h.GetAnnotations()
		if a["helm.sh/hook"] != "pre-delete" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("hook %s %s: annotations %v", h.GetKind(), h.GetName(), a)
		}
	}
	ds := into[appsv1.DaemonSet](t, one(t, r, "DaemonSet"))
	job := into[batchv1.Job](t, one(t, hooks, "Job"))
	sa := into[corev1.ServiceAccount](t, one(t, hooks, "ServiceAccount"))
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != ds.Spec.Template.Spec.Containers[0].Image || pod.ServiceAccountName != sa.Name || sa.Namespace != vs.namespace {
		t.Errorf("the hook runs %s as %s/%s: want the DaemonSet's image as its own ServiceAccount", c.Image, sa.Namespace, pod.ServiceAccountName)
	}
	if want := []string{"uninstall", "--in-cluster", "--namespace=" + vs.namespace, "--daemonset=" + ds.Name}; !slices.Equal(c.Args[:4], want) {
		t.Errorf("the hook's args %v, want %v first", c.Args, want)
	}
	if selects(ds.Spec.Selector.MatchLabels, job.Spec.Template.Labels) {
		t.Errorf("the DaemonSet's selector %v selects the hook's pod %v", ds.Spec.Selector.MatchLabels, job.Spec.Template.Labels)
	}
	role := into[rbacv1.Role](t, one(t, hooks, "Role"))
	wantRole := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{ds.Name}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
	if fmt.Sprint(role.Rules) != fmt.Sprint(wantRole) {
		t.Errorf("the hook's Role %v, want exactly %v", role.Rules, wantRole)
	}
	cluster := into[rbacv1.ClusterRole](t, one(t, hooks, "ClusterRole"))
	wantCluster := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}
	if fmt.Sprint(cluster.Rules) != fmt.Sprint(wantCluster) {
		t.Errorf("the hook's ClusterRole %v, want exactly %v", cluster.Rules, wantCluster)
	}
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		b := into[rbacv1.RoleBinding](t, one(t, hooks, kind))
		if len(b.Subjects) != 1 || b.Subjects[0].Name != sa.Name || b.Subjects[0].Namespace != sa.Namespace {
			t.Errorf("%s %s binds %v, want the hook's ServiceAccount", kind, b.Name, b.Subjects)
		}
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

// checkAdmissionPolicies: the policies that hold each pod's token to its
// node match the chart's ServiceAccount, and each is bound to deny.
func checkAdmissionPolicies(t *testing.T, r render, sa *corev1.ServiceAccount) {
	policies, bindings := r.kind("ValidatingAdmissionPolicy"), r.kind("ValidatingAdmissionPolicyBinding")
	if len(policies) != 2 || len(bindings) != 2 {
		t.Fatalf("%d admission policies and %d bindings, want 2 of each", len(policies), len(bindings))
	}
	user := "'system:serviceaccount:" + sa.Namespace + ":" + sa.Name + "'"
	bound := map[string]bool{}
	for _, b := range bindings {
		binding := into[admissionv1.ValidatingAdmissionPolicyBinding](t, b)
		if slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
			bound[binding.Spec.PolicyName] = true
		}
	}
	for _, p := range policies {
		policy := into[admissionv1.ValidatingAdmissionPolicy](t, p)
		if len(policy.Spec.MatchConditions) != 1 || !strings.Contains(policy.Spec.MatchConditions[0].Expression, user) {
			t.Errorf("policy %s matches %+v, not the chart's ServiceAccount %s", policy.Name, policy.Spec.MatchConditions, user)
		}
		if !bound[policy.Name] {
			t.Errorf("policy %s is not bound to deny", policy.Name)
		}
	}
}

// checkNetworkPolicy: when on, it selects the pods and admits the
// metrics port from the sources of the values alone.
func checkNetworkPolicy(t *testing.T, vs valueSet, r render, ds *appsv1.DaemonSet) {
	nps := r.kind("NetworkPolicy")
	if !vs.networkPolicy {
		if len(nps) != 0 {
			t.Error("a NetworkPolicy, although networkPolicy.enabled is false")
		}
		return
	}
	np := into[networkingv1.NetworkPolicy](t, one(t, r, "NetworkPolicy"))
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("podSelector %v does not select the DaemonSet's pods", np.Spec.PodSelector)
	}
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 || len(rule.Ports) != 1 || rule.Ports[0].Port.String() != "metrics" {
			t.Errorf("ingress rule %+v: want sources and the metrics port alone", rule)
		}
	}
}

// checkPodMonitor: the scraped series carry the job every rule selects
// (the release's) and the node's name as node and instance; it returns
// that job.
func checkPodMonitor(t *testing.T, r render, ds *appsv1.DaemonSet) string {
	pm := one(t, r, "PodMonitor")
	jobLabel, _, _ := unstructured.NestedString(pm.Object, "spec", "jobLabel")
	job := ds.Spec.Template.Labels[jobLabel]
	for _, j := range slices.Compact(slices.Sorted(slices.Values(ruleJobs(t, rulesOf(t, r))))) {
		if j != job && j != "kubelet" { // PlegAbsent's reference series is the kubelet's
			t.Errorf("a rule selects job=%q; the PodMonitor gives job=%q (pod label %q)", j, job, jobLabel)
		}
	}
	if job == "" {
		t.Errorf("jobLabel %q: no such label on the pods", jobLabel)
	}
	var spec struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	}
	fromUnstructured(t, pm.Object["spec"], &spec)
	sel, err := metav1.LabelSelectorAsSelector(&spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the DaemonSet's pods", spec.Selector)
	}
	if !slices.Contains(spec.NamespaceSelector.MatchNames, ds.Namespace) {
		t.Errorf("namespaceSelector %v leaves out the DaemonSet's namespace %s", spec.NamespaceSelector.MatchNames, ds.Namespace)
	}
	if len(spec.Endpoints) != 1 || spec.Endpoints[0].Port != ds.Spec.Template.Spec.Containers[0].Ports[0].Name || spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("endpoints %+v: want /metrics on the metrics port", spec.Endpoints)
	}
	for _, target := range []string{"node", "instance"} {
		named := slices.ContainsFunc(spec.Endpoints[0].Relabelings, func(rl struct {
			SourceLabels []string `json:"sourceLabels"`
			TargetLabel  string   `json:"targetLabel"`
		}) bool {
			return rl.TargetLabel == target && slices.Equal(rl.SourceLabels, []string{"__meta_kubernetes_pod_node_name"})
		})
		if !named {
			t.Errorf("relabelings %+v: want the node's name as %s", spec.Endpoints[0].Relabelings, target)
		}
	}
	return job
}

// rulesOf returns the PrometheusRule's rules.
func rulesOf(t *testing.T, r render) promtest.RuleFile {
	t.Helper()
	var f promtest.RuleFile
	fromUnstructured(t, one(t, r, "PrometheusRule").Object["spec"], &f)
	return f
}

var jobMatcher = regexp.MustCompile(`job="([^"]*)"`)

// ruleJobs are the jobs the rules' selectors name.
func ruleJobs(t *testing.T, f promtest.RuleFile) []string {
	var jobs []string
	for _, g := range f.Groups {
		for _, rule := range g.Rules {
			for _, m := range jobMatcher.FindAllStringSubmatch(rule.Expr, -1) {
				jobs = append(jobs, m[1])
			}
		}
	}
	if len(jobs) == 0 {
		t.Error("no rule selects a job")
	}
	return jobs
}

// checkPrometheusRule: with the default rule values, the rules are
// deploy/prometheus/prometheus-rules.yaml's (release pleg's) for the
// release's job.
func checkPrometheusRule(t *testing.T, r render, job string) {
	data, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ofJob := strings.NewReplacer(`job="pleg"`, `job="`+job+`"`, "- name: pleg.", "- name: "+job+".", "job: pleg\n", "job: "+job+"\n")
	want, err := promtest.ParseRules([]byte(ofJob.Replace(string(data))))
	if err != nil {
		t.Fatal(err)
	}
	if got := rulesOf(t, r); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the PrometheusRule's rules differ from deploy/prometheus/prometheus-rules.yaml's for job %s:\n%v\n%v", job, got, want)
	}
}

// checkDashboardConfigMap: the dashboard, labelled for Grafana's sidecar,
// selects the release's job alone, with a uid of its own.
func checkDashboardConfigMap(t *testing.T, r render, job string) {
	cm := into[corev1.ConfigMap](t, one(t, r, "ConfigMap"))
	var d struct {
		UID string `json:"uid"`
	}
	if err := json.Unmarshal([]byte(cm.Data["pleg.json"]), &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s: labels %v; want grafana_dashboard=1", cm.Name, cm.Labels)
	}
	jobs := map[string]bool{}
	for _, m := range regexp.MustCompile(`job=\\"([^\\"]*)\\"`).FindAllStringSubmatch(cm.Data["pleg.json"], -1) {
		jobs[m[1]] = true
	}
	if len(jobs) != 1 || !jobs[job] {
		t.Errorf("the dashboard selects jobs %v, want %s alone", jobs, job)
	}
	if wantUID := "pleg-fleet-" + job; job != "pleg" && d.UID != wantUID {
		t.Errorf("dashboard uid %q, want %q", d.UID, wantUID)
	}
}

func fromUnstructured(t *testing.T, from any, into any) {
	t.Helper()
	data, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}
