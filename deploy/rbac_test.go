// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestRBAC checks the shape of rbac.yaml and that the DaemonSet runs as
// its ServiceAccount, reporting on the node the downward API names. That
// the role holds exactly the verbs pleg needs is tested against a real API
// server, in test/kube.
func TestRBAC(t *testing.T) {
	docs := bytes.Split(read(t, "rbac.yaml"), []byte("\n---\n"))
	if len(docs) != 3 {
		t.Fatalf("rbac.yaml: %d documents, want a ServiceAccount, a ClusterRole and a ClusterRoleBinding", len(docs))
	}
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
	)
	for i, into := range []any{&sa, &role, &binding} {
		if err := yaml.UnmarshalStrict(docs[i], into); err != nil {
			t.Fatalf("rbac.yaml document %d: %v", i+1, err)
		}
	}
	if sa.Kind != "ServiceAccount" || role.Kind != "ClusterRole" || binding.Kind != "ClusterRoleBinding" {
		t.Fatalf("kinds %s, %s, %s", sa.Kind, role.Kind, binding.Kind)
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Error("the ServiceAccount should not mount its token in pods that do not ask for it")
	}
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name ||
		len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
		binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("binding %+v does not bind %s to %s/%s", binding, role.Name, sa.Namespace, sa.Name)
	}

	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(read(t, "daemonset.yaml"), &ds); err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != sa.Name || ds.Namespace != sa.Namespace {
		t.Errorf("the DaemonSet runs as %s/%s, want %s/%s", ds.Namespace, pod.ServiceAccountName, sa.Namespace, sa.Name)
	}
	c := pod.Containers[0]
	if !slices.Contains(c.Args, "--in-cluster") {
		t.Errorf("args %v: want --in-cluster", c.Args)
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("--in-cluster needs the pod to mount its token")
	}
	nodeName := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	})
	if !nodeName {
		t.Errorf("env %+v: want NODE_NAME from the downward API's spec.nodeName", c.Env)
	}
}

// TestKustomization checks that Kustomization lists exactly the files of
// deploy/ that hold Kubernetes objects, and that every file kubectl
// apply -f deploy/ reads (.yaml, .yml, .json) holds Kubernetes objects
// alone. kustomize reads a file named Kustomization as it reads
// kustomization.yaml; kubectl apply -f skips it, as it has no extension.
func TestKustomization(t *testing.T) {
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(read(t, "Kustomization"), &k); err != nil {
		t.Fatal(err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("%s %s: want a kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	var files []string
	for _, ext := range []string{"*.yaml", "*.yml", "*.json"} {
		m, err := filepath.Glob(ext)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	var want []string
	for _, f := range files {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		first, _, _ := bytes.Cut(read(t, f), []byte("\n---\n"))
		if err := yaml.Unmarshal(first, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if obj.APIVersion == "" || obj.Kind == "" || obj.Kind == "Kustomization" {
			t.Errorf("%s: its first document is no Kubernetes object (apiVersion %q, kind %q): kubectl apply -f deploy/ fails on it", f, obj.APIVersion, obj.Kind)
			continue
		}
		want = append(want, f)
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization resources %v, want the manifests %v", got, want)
	}
}
