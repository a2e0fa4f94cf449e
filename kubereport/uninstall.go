// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// UninstallClient is what Uninstall needs of the API: the DaemonSet, its
// pods and the nodes they ran on. client-go's kubernetes.Interface has it.
type UninstallClient interface {
	AppsV1() appsv1client.AppsV1Interface
	CoreV1() corev1client.CoreV1Interface
}

// UninstallOptions name pleg's DaemonSet and bound the wait for its pods.
type UninstallOptions struct {
	Namespace, DaemonSet string
	// Wait bounds the wait for the pods to stop (default 2 minutes).
	Wait time.Duration
	// Poll is the pause between two looks at the pods (default 1 s).
	Poll time.Duration
	Log  *slog.Logger
	// Now is the clock, for the message of a condition written here.
	Now func() time.Time
}

// UninstallResult is what Uninstall did.
type UninstallResult struct {
	// Found is false when the DaemonSet was already gone.
	Found bool
	// Nodes are those where one of the DaemonSet's pods ran.
	Nodes []string
	// Stopped are the pods that stopped within the wait; Left, those
	// still there when it ended.
	Stopped, Left []string
	// SaidStopped are the nodes whose pod wrote the condition Unknown
	// (PLEGStopped) itself; Marked, those where Uninstall wrote it for a
	// pod that could not (its node lost, the pod killed, the wait over).
	SaidStopped, Marked []string
}

// Uninstall stops pleg's DaemonSet before the chart's other objects go,
// which is what `helm uninstall` runs it for, as a pre-delete hook: it
// deletes the DaemonSet (foreground: its pods first), waits until each
// of its pods has stopped, and so has written its node's condition
// Unknown (PLEGStopped) with its own ServiceAccount, which helm deletes
// only after the hook; then, on each node where a pod ran and whose
// condition is not Unknown, it writes the condition Unknown itself. A
// plain `helm uninstall` would delete the DaemonSet, the ServiceAccount
// and the role in one go, and the pods' last write would be refused: the
// condition would keep its last value forever.
//
// Nodes where no pod of this DaemonSet ran are left alone: another
// release of pleg may report on them.
func Uninstall(ctx context.Context, c UninstallClient, o UninstallOptions) (UninstallResult, error) {
	if o.Wait <= 0 {
		o.Wait = 2 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var res UninstallResult
	ds, err := c.AppsV1().DaemonSets(o.Namespace).Get(ctx, o.DaemonSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		o.Log.Info("No DaemonSet to stop", "namespace", o.Namespace, "daemonset", o.DaemonSet)
		return res, nil
	case err != nil:
		return res, fmt.Errorf("reading DaemonSet %s/%s: %w", o.Namespace, o.DaemonSet, err)
	}
	res.Found = true
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return res, fmt.Errorf("DaemonSet %s/%s's selector: %w", o.Namespace, o.DaemonSet, err)
	}
	pods := func() ([]corev1.Pod, error) {
		list, err := c.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return nil, fmt.Errorf("listing DaemonSet %s/%s's pods: %w", o.Namespace, o.DaemonSet, err)
		}
		var mine []corev1.Pod
		for _, p := range list.Items {
			if slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == ds.UID }) {
				mine = append(mine, p)
			}
		}
		return mine, nil
	}
	before, err := pods()
	if err != nil {
		return res, err
	}
	for _, p := range before {
		if p.Spec.NodeName != "" && !slices.Contains(res.Nodes, p.Spec.NodeName) {
			res.Nodes = append(res.Nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(res.Nodes)

	foreground := metav1.DeletePropagationForeground
	err = c.AppsV1().DaemonSets(o.Namespace).Delete(ctx, o.DaemonSet, metav1.DeleteOptions{
		PropagationPolicy: &foreground,
		Preconditions:     &metav1.Preconditions{UID: &ds.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return res, fmt.Errorf("deleting DaemonSet %s/%s: %w", o.Namespace, o.DaemonSet, err)
	}
	o.Log.Info("Deleted pleg's DaemonSet; waiting for its pods to stop", "namespace", o.Namespace,
		"daemonset", o.DaemonSet, "pods", len(before), "wait", o.Wait)

	left, err := waitPodsGone(ctx, pods, o)
	if err != nil {
		return res, err
	}
	for _, p := range before {
		if slices.Contains(left, p.Name) {
			res.Left = append(res.Left, p.Name)
		} else {
			res.Stopped = append(res.Stopped, p.Name)
		}
	}
	if len(res.Left) > 0 {
		o.Log.Warn("Some of pleg's pods did not stop in time; their nodes' condition is set Unknown here",
			"pods", res.Left, "wait", o.Wait)
	}

	return res, markNodes(ctx, c.CoreV1().Nodes(), o, &res)
}

// markNodes writes the condition Unknown on res.Nodes where the pods did
// not, and notes which.
func markNodes(ctx context.Context, nodes corev1client.NodeInterface, o UninstallOptions, res *UninstallResult) error {
	for _, name := range res.Nodes {
		st, err := markStopped(ctx, nodes, name, o.Now())
		switch {
		case apierrors.IsNotFound(err):
			continue // the node is gone, and its condition with it
		case err != nil:
			return fmt.Errorf("node %s: %w", name, err)
		case st == saidStopped:
			res.SaidStopped = append(res.SaidStopped, name)
		case st == marked:
			res.Marked = append(res.Marked, name)
			o.Log.Info("Set pleg's node condition Unknown for a pod that did not", "node", name)
		}
	}
	return nil
}

// waitPodsGone polls pods until none is left or o.Wait is over, and
// returns the names of those left.
func waitPodsGone(ctx context.Context, pods func() ([]corev1.Pod, error), o UninstallOptions) ([]string, error) {
	deadline := time.NewTimer(o.Wait)
	defer deadline.Stop()
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for {
		left, err := pods()
		if err != nil {
			return nil, err
		}
		if len(left) == 0 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			var names []string
			for _, p := range left {
				names = append(names, p.Name)
			}
			return names, nil
		case <-tick.C:
		}
	}
}

// stopState is what markStopped found on a node.
type stopState int

const (
	noCondition stopState = iota // pleg never wrote one: none is added
	saidStopped                  // Unknown already: the pod said it stopped
	marked                       // markStopped wrote it Unknown
)

// markStopped writes node's condition Unknown (PLEGStopped) unless it is
// already. A node without pleg's condition gets none.
func markStopped(ctx context.Context, nodes corev1client.NodeInterface, name string, now time.Time) (stopState, error) {
	node, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return noCondition, err
	}
	switch cur := find(node); {
	case cur == nil:
		return noCondition, nil
	case cur.Status == corev1.ConditionUnknown:
		return saidStopped, nil
	}
	cond := corev1.NodeCondition{
		Type:   ConditionType,
		Status: corev1.ConditionUnknown,
		Reason: ReasonStopped,
		Message: fmt.Sprintf("pleg was uninstalled at %s, and its pod on this node did not say it stopped: "+
			"nothing reports on this node's PLEG", now.UTC().Format(time.RFC3339)),
		LastHeartbeatTime:  metav1.NewTime(now),
		LastTransitionTime: metav1.NewTime(now),
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return noCondition, err
	}
	_, err = nodes.Patch(ctx, name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	return marked, err
}
