// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// DiagnosisPort is the name of the container port the chart gives pleg's
// diagnosis listener (diagnosis.enabled).
const DiagnosisPort = "diagnosis"

// Proxy reaches the pleg of a node through the API server.
type Proxy interface {
	// Find returns the name and diagnosis port of the pleg pod on node.
	Find(ctx context.Context, node string) (pod, port string, err error)
	// Get GETs path of that pod's diagnosis listener.
	Get(ctx context.Context, pod, port, path string, params map[string]string) (io.ReadCloser, error)
}

// podProxy is Proxy through the API server's pods/proxy: the API server
// connects to the pod's address itself, so neither the kubelet nor the
// runtime is on the way (kubectl exec, logs and port-forward all take the
// runtime's path). RBAC: get and list on pods and get on pods/proxy, in
// pleg's namespace.
type podProxy struct {
	cs        kubernetes.Interface
	namespace string
	selector  string
	scheme    string
}

// Find lists pleg's pods on node: its namespace's pods of the selector on
// that node, by the API server's field selector.
func (p *podProxy) Find(ctx context.Context, node string) (string, string, error) {
	pods, err := p.cs.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: p.selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return "", "", fmt.Errorf("finding pleg's pod on %s in namespace %s: %w", node, p.namespace, err)
	}
	var running []corev1.Pod
	for _, pod := range pods.Items {
		if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
			running = append(running, pod)
		}
	}
	switch len(running) {
	case 0:
		return "", "", fmt.Errorf("no running pod of %s on node %s in namespace %s (%d found): is pleg installed "+
			"there (-n NAMESPACE), and the node's name right?", p.selector, node, p.namespace, len(pods.Items))
	case 1:
	default:
		var names []string
		for _, pod := range running {
			names = append(names, pod.Name+" ("+pod.Labels["app.kubernetes.io/instance"]+")")
		}
		return "", "", fmt.Errorf("%d pleg pods on node %s: %s; choose a release with "+
			"-l app.kubernetes.io/name=pleg,app.kubernetes.io/instance=RELEASE", len(running), node,
			strings.Join(names, ", "))
	}
	pod := running[0]
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == DiagnosisPort {
				return pod.Name, strconv.Itoa(int(port.ContainerPort)), nil
			}
		}
	}
	return "", "", fmt.Errorf("pleg's pod %s on node %s has no %q port: install the chart with "+
		"diagnosis.enabled=true (docs/kubernetes.md), or reach it over SSH (docs/runbook.md)", pod.Name, node,
		DiagnosisPort)
}

// Get GETs path through the API server's proxy of the pod.
func (p *podProxy) Get(ctx context.Context, pod, port, path string, params map[string]string,
) (io.ReadCloser, error) {
	rc, err := p.cs.CoreV1().Pods(p.namespace).ProxyGet(p.scheme, pod, port, path, params).Stream(ctx)
	if err != nil {
		return nil, explain(err, p.namespace)
	}
	return rc, nil
}

// explain turns an API server's refusal into what to do about it.
func explain(err error, namespace string) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	// An answer of pleg's itself (a 429 while a bundle is made, a 503
	// without a runtime) comes as the cause the client read in its body.
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Type == metav1.CauseTypeUnexpectedServerResponse && c.Message != "" {
				err = fmt.Errorf("%w: %s", err, strings.TrimSpace(c.Message))
			}
		}
	}
	switch status.Status().Code {
	case http.StatusForbidden:
		return fmt.Errorf("%w\n(kubectl pleg needs get on pods/proxy and get, list on pods in namespace %s: "+
			"the chart's Role RELEASE-diagnosis, bound with diagnosis.subjects)", err, namespace)
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return fmt.Errorf("%w\n(the API server could not reach the pod: a NetworkPolicy that does not admit it "+
			"(the chart's diagnosis.from), or the node is down)", err)
	}
	return err
}
