// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nodeNameClaim is where the API server puts a pod-bound token's node.
const nodeNameClaim = "authentication.kubernetes.io/node-name"

// tokenHeldToItsNode reads the token the kubelet projected into pleg's
// pod, checks that it names the pod's node, and that it cannot write
// another node's condition.
func (c *cluster) tokenHeldToItsNode(t *testing.T, ctx context.Context) {
	p, err := c.plegPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(c.kubelet.RootDir(), "pods", string(p.UID), "volumes",
		"kubernetes.io~projected", "*", "token"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the pod's projected token: %v %v", files, err)
	}
	token, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	review, err := c.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: string(token)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.User.Extra[nodeNameClaim]; len(got) != 1 || got[0] != nodeName {
		t.Fatalf("the pod's token names node %v (user %s), want %s", got, review.Status.User.Username, nodeName)
	}

	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "another-node"}}
	if _, err := c.cs.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	defer func() {
		if err := c.cs.CoreV1().Nodes().Delete(ctx, other.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}()
	cfg := rest.CopyConfig(c.server.Config(string(token)))
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"status":{"conditions":[{"type":"PLEGDegraded","status":"True","reason":"Forged",` +
		`"message":"written with another node's token"}]}}`)
	_, err = as.CoreV1().Nodes().Patch(ctx, other.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("pleg's token patched another node's status: err = %v, want forbidden", err)
	} else {
		t.Logf("another node's status, with pleg's token: %v", err)
	}
	// The same patch on its own node is what pleg does: allowed.
	own := []byte(`{"status":{"conditions":[{"type":"PLEGDegraded","status":"False","reason":"PLEGIsHealthy",` +
		`"message":"relisting keeps within its threshold and every pod's status calls answer"}]}}`)
	if _, err := as.CoreV1().Nodes().Patch(ctx, nodeName, types.StrategicMergePatchType, own, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("pleg's token cannot patch its own node's status: %v", err)
	}
}
