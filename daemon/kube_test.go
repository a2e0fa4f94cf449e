// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// TestKubeReport runs the daemon with reporting on, against client-go's
// fake API server: the node gets pleg's condition once the first relist
// succeeds, and the daemon's /metrics counts the write. The real API
// server's tests are in test/kube.
func TestKubeReport(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "shop",
		Sandboxes: []fakeruntime.Sandbox{{ID: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
	})
	api := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	d, stop := runDaemon(t, Config{
		Runtime:   rt,
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond},
		Listen:    "127.0.0.1:0",
		// Written at once, not after a share of the fleet's spread.
		Kube: &kubereport.Config{NodeName: "node-1", Client: api, Spread: time.Millisecond},
	})
	eventually(t, "pleg's condition on the node", func() bool {
		node, err := api.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == kubereport.ConditionType {
				if c.Status != corev1.ConditionFalse || c.Reason != kubereport.ReasonHealthy {
					t.Fatalf("condition %+v, want healthy", c)
				}
				return true
			}
		}
		return false
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(d.Registry, "pleg_kube_reports_total"); err != nil || n != 3 {
		t.Errorf("pleg_kube_reports_total: %d series, %v; want 3 in the daemon's registry", n, err)
	}
}
