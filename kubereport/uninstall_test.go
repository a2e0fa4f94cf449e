// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Uninstall deletes the DaemonSet in the foreground, waits for its pods,
// and writes Unknown only where a pod of it ran and did not say it
// stopped: node-a's pod stops and writes its condition, node-b's never
// stops (its node lost), node-c is another release's.
func TestUninstall(t *testing.T) {
	sel := map[string]string{"app.kubernetes.io/name": "pleg", "app.kubernetes.io/instance": "pleg"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pleg", Namespace: "kube-system", UID: "ds-uid"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}},
	}
	pod := func(name, node string, owner types.UID) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: sel,
				OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "x", UID: owner}}},
			Spec: corev1.PodSpec{NodeName: node},
		}
	}
	node := func(name string, status corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
			{Type: ConditionType, Status: status, Reason: ReasonHealthy},
		}}}
	}
	nodeA := node("node-a", corev1.ConditionFalse)
	api := fake.NewClientset(ds,
		pod("pleg-a", "node-a", "ds-uid"), pod("pleg-b", "node-b", "ds-uid"),
		pod("other", "node-c", "another-uid"), // not the DaemonSet's, though its labels match
		nodeA, node("node-b", corev1.ConditionFalse), node("node-c", corev1.ConditionFalse))
	var propagation metav1.DeletionPropagation
	api.PrependReactor("delete", "daemonsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		propagation = *a.(k8stesting.DeleteAction).GetDeleteOptions().PropagationPolicy
		// The garbage collector deletes node-a's pod, which says it stops.
		// (The tracker, not the client: a reactor runs under the fake's
		// lock.)
		if err := api.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "kube-system", "pleg-a"); err != nil {
			t.Error(err)
		}
		nodes := corev1.SchemeGroupVersion.WithResource("nodes")
		n := nodeA.DeepCopy()
		n.Status.Conditions[1] = corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionUnknown, Reason: ReasonStopped}
		if err := api.Tracker().Update(nodes, n, ""); err != nil {
			t.Error(err)
		}
		return false, nil, nil
	})
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	res, err := Uninstall(t.Context(), api, UninstallOptions{
		Namespace: "kube-system", DaemonSet: "pleg", Wait: 300 * time.Millisecond, Poll: 20 * time.Millisecond,
		Now: func() time.Time { return at },
	})
	if err != nil {
		t.Fatal(err)
	}
	if propagation != metav1.DeletePropagationForeground {
		t.Errorf("deleted with propagation %q, want Foreground: the pods first", propagation)
	}
	if _, err := api.AppsV1().DaemonSets("kube-system").Get(t.Context(), "pleg", metav1.GetOptions{}); err == nil {
		t.Error("the DaemonSet is still there")
	}
	want := UninstallResult{Found: true, Nodes: []string{"node-a", "node-b"}, Stopped: []string{"pleg-a"}, Left: []string{"pleg-b"},
		SaidStopped: []string{"node-a"}, Marked: []string{"node-b"}}
	if !slices.Equal(res.Nodes, want.Nodes) || !slices.Equal(res.Stopped, want.Stopped) || !slices.Equal(res.Left, want.Left) ||
		!slices.Equal(res.SaidStopped, want.SaidStopped) || !slices.Equal(res.Marked, want.Marked) || !res.Found {
		t.Errorf("result %+v, want %+v", res, want)
	}
	for name, status := range map[string]corev1.ConditionStatus{
		"node-a": corev1.ConditionUnknown, "node-b": corev1.ConditionUnknown, "node-c": corev1.ConditionFalse,
	} {
		n, err := api.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := find(n)
		if c == nil || c.Status != status {
			t.Errorf("%s: condition %+v, want %s", name, c, status)
			continue
		}
		if ready := n.Status.Conditions[0]; ready.Type != corev1.NodeReady || ready.Status != corev1.ConditionTrue {
			t.Errorf("%s: the kubelet's condition changed: %+v", name, ready)
		}
		if name == "node-b" && (c.Reason != ReasonStopped || !strings.Contains(c.Message, "uninstalled at 2026-11-28T12:00:00Z") ||
			!c.LastTransitionTime.Time.Equal(at)) {
			t.Errorf("node-b: %+v, want PLEGStopped, saying it was uninstalled, since %v", c, at)
		}
	}
}

// With the DaemonSet gone already (a second run of the hook, or an
// operator who deleted it), Uninstall does nothing and says so.
func TestUninstallWithoutDaemonSet(t *testing.T) {
	api := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	res, err := Uninstall(t.Context(), api, UninstallOptions{Namespace: "kube-system", DaemonSet: "pleg"})
	if err != nil || res.Found || len(res.Nodes) != 0 {
		t.Errorf("Uninstall without a DaemonSet: %+v, %v", res, err)
	}
	for _, a := range api.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("Uninstall without a DaemonSet did %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
