// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClientKeepsToItsRate makes requests through a client of 2 requests
// a second with a burst of 1: the fourth cannot leave before 1.5 s. Only
// a lower bound is asserted, which a busy machine cannot break.
func TestClientKeepsToItsRate(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-1"}}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ClientOptions{Kubeconfig: kubeconfig, QPS: 2, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 4 {
		if _, err := c.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 1400*time.Millisecond || requests.Load() != 4 {
		t.Errorf("4 requests at 2 a second, burst 1: took %v, %d served; want at least 1.5 s", took, requests.Load())
	}

	if _, err := NewClient(ClientOptions{Kubeconfig: kubeconfig, QPS: -1}); err == nil {
		t.Error("a negative QPS was accepted")
	}
}
