// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// Issue 22 found that pleg's ClusterRole let any pleg pod's token patch
// the status of every node. With deploy/admission-policy.yaml applied, a
// token bound to a pod on node A (as the kubelet mounts it in the pleg
// pod) writes node A's PLEGDegraded and its events, and nothing else: not
// node B, not node A's Ready, labels or other status; a token that names
// no node writes nothing. The daemon itself, on that token, writes its
// condition, a pod's event and, as it stops, Unknown.
func TestAdmissionPolicyHoldsPlegToItsNode(t *testing.T) {
	srv, cs := apiServer(t)
	dyn, err := dynamic.NewForConfig(srv.Config(kubetest.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	all := manifests(t)
	apply(t, cs, dyn, all["rbac.yaml"], false)
	apply(t, cs, dyn, all["admission-policy.yaml"], false)
	if t.Failed() {
		t.FailNow()
	}
	const nodeA, nodeB = "node-a", "node-b"
	createNode(t, cs, nodeA)
	createNode(t, cs, nodeB)

	onA := kubeClient(t, srv, boundToken(t, cs, nodeA))
	unbound := kubeClient(t, srv, plegToken(t, cs, nil))
	// Later tests use pleg's ServiceAccount with tokens bound to no pod:
	// the policies go, and the test ends once the API server admits such
	// a token's writes again.
	t.Cleanup(func() {
		ctx := context.Background()
		for _, name := range []string{"pleg-node-status", "pleg-events"} {
			_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
			_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
		}
		eventually(t, "the policies gone", time.Minute, func() bool {
			return patchStatus(unbound, nodeA, conditionPatch(kubereport.ConditionType, corev1.ConditionFalse), metav1.DryRunAll) == nil
		})
	})

	// The policies take effect once the API server has read them: until
	// a dry run, which admission sees but nothing stores, is refused.
	eventually(t, "the policy to refuse node B", time.Minute, func() bool {
		return apierrors.IsForbidden(patchStatus(onA, nodeB, conditionPatch(kubereport.ConditionType, corev1.ConditionFalse), metav1.DryRunAll))
	})
	// Each policy is read on its own: the events' may come later.
	eventually(t, "the policy to refuse an event on node B", time.Minute, func() bool {
		return apierrors.IsForbidden(createNodeEvent(onA, nodeB, nodeA, []string{metav1.DryRunAll}))
	})
	for _, tc := range []struct {
		what   string
		client kubernetes.Interface
		node   string
		patch  func(kubernetes.Interface, string) error
		want   string // "" when admitted
	}{
		{"its own condition on its node", onA, nodeA, plegCondition, ""},
		{"its own condition on another node", onA, nodeB, plegCondition, "may write only its own node's status, not node-b's"},
		{"the kubelet's Ready on its node", onA, nodeA, notReady, "may change only its own condition"},
		{"a label on its node, through the status", onA, nodeA, label, "not the node's labels"},
		{"the node's capacity", onA, nodeA, capacity, "not the rest of the node's status"},
		{"a token bound to no pod", unbound, nodeA, plegCondition, "names no node"},
		{"an event on its node", onA, nodeA, nodeEvent(nodeA), ""},
		{"an event on another node", onA, nodeB, nodeEvent(nodeA), "only on its own node, not on node-b"},
		{"an event as another instance", onA, nodeA, nodeEvent(nodeB), "reportingInstance node-a"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			err := tc.patch(tc.client, tc.node)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want forbidden saying %q", err, tc.want)
			}
		})
	}
	if c := condition(t, cs, nodeB); c != nil {
		t.Errorf("node B has pleg's condition %+v, written by node A's pleg", c)
	}

	// The daemon on node A's token.
	kubeconfig, err := srv.WriteKubeconfig("pleg-node-a", boundToken(t, cs, nodeA))
	if err != nil {
		t.Fatal(err)
	}
	s := startSim(t, sim.Options{})
	d, stop := startDaemon(t, s, kubeconfig, nodeA, pleg.Options{InspectTimeout: time.Second})
	waitCondition(t, cs, nodeA, corev1.ConditionFalse, kubereport.ReasonHealthy, time.Minute)
	hung := somePod(t, d)
	if err := s.SetFaults(sim.Faults{HangPod: hung.UID}); err != nil {
		t.Fatal(err)
	}
	d.Gen.RequestReinspect(hung.UID)
	eventually(t, "the pod's event written under the policy", time.Minute, func() bool {
		return hasEvent(podEvents(t, cs, hung.Namespace, hung.Name, hung.UID), corev1.EventTypeWarning, kubereport.ReasonPodStatusHung) != nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := condition(t, cs, nodeA); c == nil || c.Status != corev1.ConditionUnknown || c.Reason != kubereport.ReasonStopped {
		t.Errorf("node A's condition after pleg stopped: %+v, want Unknown %s", c, kubereport.ReasonStopped)
	}
}

// boundToken is a token of pleg's ServiceAccount bound to a pod of its own
// scheduled on node, as the kubelet mounts one in the pleg pod: the API
// server names the node in it.
func boundToken(t *testing.T, cs kubernetes.Interface, node string) string {
	t.Helper()
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pleg-", Namespace: "kube-system"},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "pleg",
			Containers:         []corev1.Container{{Name: "pleg", Image: "ghcr.io/plegkit/pleg:latest"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods("kube-system").Delete(context.Background(), pod.Name, *metav1.NewDeleteOptions(0))
	})
	return plegToken(t, cs, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
}

// plegToken requests a token of pleg's ServiceAccount, bound to ref if
// given.
func plegToken(t *testing.T, cs kubernetes.Interface, ref *authenticationv1.BoundObjectReference) string {
	t.Helper()
	tok, err := cs.CoreV1().ServiceAccounts("kube-system").CreateToken(context.Background(), "pleg", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600)), BoundObjectRef: ref},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

func kubeClient(t *testing.T, srv *kubetest.Server, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(srv.Config(token))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// patchStatus sends a strategic merge patch of node's status, as pleg's
// reporter does, and with dryRun as a dry run.
func patchStatus(cs kubernetes.Interface, node string, patch map[string]any, dryRun ...string) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, data,
		metav1.PatchOptions{FieldManager: "pleg", DryRun: dryRun}, "status")
	return err
}

func conditionPatch(kind corev1.NodeConditionType, status corev1.ConditionStatus) map[string]any {
	now := metav1.Now()
	return map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: kind, Status: status, Reason: "Test", Message: "written by a test", LastHeartbeatTime: now, LastTransitionTime: now,
	}}}}
}

func plegCondition(cs kubernetes.Interface, node string) error {
	return patchStatus(cs, node, conditionPatch(kubereport.ConditionType, corev1.ConditionFalse))
}

func notReady(cs kubernetes.Interface, node string) error {
	return patchStatus(cs, node, conditionPatch(corev1.NodeReady, corev1.ConditionFalse))
}

func label(cs kubernetes.Interface, node string) error {
	return patchStatus(cs, node, map[string]any{"metadata": map[string]any{"labels": map[string]string{"pleg-test": "x"}}})
}

func capacity(cs kubernetes.Interface, node string) error {
	return patchStatus(cs, node, map[string]any{"status": map[string]any{"capacity": map[string]string{"pods": "1000"}}})
}

// nodeEvent writes an event on a node, as pleg's recorder would, naming
// instance as its reporting instance.
func nodeEvent(instance string) func(kubernetes.Interface, string) error {
	return func(cs kubernetes.Interface, node string) error {
		return createNodeEvent(cs, node, instance, nil)
	}
}

// createNodeEvent creates an event about node as pleg's instance, with
// dryRun as the create's DryRun.
func createNodeEvent(cs kubernetes.Interface, node, instance string, dryRun []string) error {
	_, err := cs.EventsV1().Events("default").Create(context.Background(), &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: node + "-"},
		EventTime:           metav1.NowMicro(),
		ReportingController: kubereport.Component,
		ReportingInstance:   instance,
		Action:              "Test",
		Reason:              "Test",
		Note:                "written by a test",
		Type:                corev1.EventTypeNormal,
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)},
	}, metav1.CreateOptions{DryRun: dryRun})
	return err
}
