// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

const deployDir = "../../deploy"

// manifests are the Kubernetes objects of deploy/*.yaml, by file; files
// that hold no Kubernetes object (Prometheus rules, the kustomization) are
// left out.
func manifests(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/*.yaml: %v, %v", files, err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			u := &unstructured.Unstructured{Object: obj}
			if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetKind() == "Kustomization" {
				continue
			}
			out[filepath.Base(f)] = append(out[filepath.Base(f)], u)
		}
	}
	return out
}

// apply applies objs with server-side apply, for real or as a dry run.
func apply(t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	opts := metav1.ApplyOptions{FieldManager: "pleg-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, obj.GetName(), err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if obj.GetNamespace() != "" {
			r = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := r.Apply(context.Background(), obj.GetName(), obj, opts); err != nil {
			t.Errorf("server-side apply of %s %s/%s (dry run %v): %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), dryRun, err)
		}
	}
}

// TestDeployManifestsApply applies every Kubernetes object of deploy/ to
// the API server with server-side apply, as a dry run: the API server
// validates and admits them as it would in a cluster.
func TestDeployManifestsApply(t *testing.T) {
	srv, cs := apiServer(t)
	dyn, err := dynamic.NewForConfig(srv.Config(kubetest.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	all := manifests(t)
	for _, want := range []string{"daemonset.yaml", "rbac.yaml"} {
		if len(all[want]) == 0 {
			t.Errorf("deploy/%s holds no Kubernetes object", want)
		}
	}
	for file, objs := range all {
		t.Run(file, func(t *testing.T) { apply(t, cs, dyn, objs, true) })
	}
}

// TestRBAC applies deploy/rbac.yaml, then checks that its ServiceAccount
// may do what reporting and reading the kubelet's metrics need and
// nothing else, and runs the daemon with that account's token: the
// condition and a pod's event get written.
func TestRBAC(t *testing.T) {
	srv, cs := apiServer(t)
	dyn, err := dynamic.NewForConfig(srv.Config(kubetest.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	apply(t, cs, dyn, manifests(t)["rbac.yaml"], false)
	if t.Failed() {
		t.FailNow()
	}
	ctx := context.Background()
	const ns, sa = "kube-system", "pleg"
	user := "system:serviceaccount:" + ns + ":" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	for _, tc := range []struct {
		verb, group, resource, sub string
		allowed                    bool
	}{
		{"get", "", "nodes", "", true},
		{"patch", "", "nodes", "status", true},
		{"create", "events.k8s.io", "events", "", true},
		{"patch", "events.k8s.io", "events", "", true},
		{"get", "", "nodes", "metrics", true},

		{"get", "", "nodes", "proxy", false},
		{"get", "", "nodes", "stats", false},
		{"get", "", "nodes", "log", false},
		{"list", "", "nodes", "", false},
		{"watch", "", "nodes", "", false},
		{"patch", "", "nodes", "", false},
		{"update", "", "nodes", "status", false},
		{"delete", "", "nodes", "", false},
		{"get", "", "pods", "", false},
		{"list", "", "pods", "", false},
		{"get", "", "secrets", "", false},
		{"create", "", "events", "", false},
		{"update", "events.k8s.io", "events", "", false},
		{"delete", "events.k8s.io", "events", "", false},
		{"list", "events.k8s.io", "events", "", false},
	} {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.sub, Namespace: "shop"},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s %s %s/%s: allowed %v, want %v", user, tc.verb, tc.group, strings.TrimSuffix(tc.resource+"/"+tc.sub, "/"), sar.Status.Allowed, tc.allowed)
		}
	}

	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := srv.WriteKubeconfig("pleg-sa", tok.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	const node = "node-rbac"
	createNode(t, cs, node)
	s := startSim(t, sim.Options{})
	d := runDaemon(t, s, kubeconfig, node, pleg.Options{InspectTimeout: time.Second})
	waitCondition(t, cs, node, corev1.ConditionFalse, kubereport.ReasonHealthy, time.Minute)
	hung := somePod(t, d)
	if err := s.SetFaults(sim.Faults{HangPod: hung.UID}); err != nil {
		t.Fatal(err)
	}
	d.Gen.RequestReinspect(hung.UID)
	eventually(t, "a pod event written with the ServiceAccount's token", time.Minute, func() bool {
		return hasEvent(podEvents(t, cs, hung.Namespace, hung.Name, hung.UID), corev1.EventTypeWarning, kubereport.ReasonPodStatusHung) != nil
	})
	waitCondition(t, cs, node, corev1.ConditionTrue, kubereport.ReasonPodStatusHung, time.Minute)
}

func ptr[T any](v T) *T { return &v }
