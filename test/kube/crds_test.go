// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/test/kube/kubetest"
)

// The Prometheus operator whose CRDs the chart's PodMonitor and
// PrometheusRule need. Its Go module ships them as published
// (example/prometheus-operator-crd), so the Go module proxy serves them.
const (
	operatorModule  = "github.com/prometheus-operator/prometheus-operator"
	operatorVersion = "v0.85.0"
)

var operatorCRDs = []string{"monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"}

var (
	crdsOnce sync.Once
	crdsErr  error
)

// installOperatorCRDs installs the PodMonitor and PrometheusRule CRDs into
// the shared API server, once per test binary, and waits until they are
// established.
func installOperatorCRDs(t *testing.T, srv *kubetest.Server) {
	t.Helper()
	crdsOnce.Do(func() { crdsErr = installCRDs(srv) })
	if crdsErr != nil {
		if kubetest.InCI() {
			t.Fatalf("the Prometheus operator's CRDs are required under CI=true: %v", crdsErr)
		}
		t.Skipf("skipping, no Prometheus operator CRDs: %v", crdsErr)
	}
}

func installCRDs(srv *kubetest.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := moduleSource(ctx, operatorModule, operatorVersion)
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(srv.Config(kubetest.AdminToken))
	if err != nil {
		return err
	}
	for _, name := range operatorCRDs {
		data, err := os.ReadFile(filepath.Join(dir, "example", "prometheus-operator-crd", name))
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", crd.Name, err)
		}
		for {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if established(got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not established: %w", crd.Name, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// moduleSource downloads module@version through the Go module proxy (or
// finds it in the module cache) and returns its directory.
func moduleSource(ctx context.Context, module, version string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("go mod download %s@%s (it needs the Go module proxy): %w\n%s", module, version, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}
