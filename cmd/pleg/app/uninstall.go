// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plegkit/pleg/internal/version"
	"github.com/plegkit/pleg/kubereport"
)

// serviceAccountNamespace is where a pod reads its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// newUninstallCommand is pleg uninstall: what the chart's pre-delete hook
// runs, so that a plain `helm uninstall` leaves every node's condition
// Unknown instead of its last value.
func newUninstallCommand(g *global) *cobra.Command {
	var (
		kubeconfig, namespace, daemonSet string
		inCluster                        bool
		wait                             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop pleg's DaemonSet and leave its nodes' condition Unknown (the chart's pre-delete hook)",
		Long: `Uninstall deletes pleg's DaemonSet, its pods first, and waits until each has
stopped: as it stops, each pod writes its node's condition PLEGDegraded
Unknown (PLEGStopped) with its own credentials. On a node whose pod did not
(its node lost, the pod killed, --wait over), it writes the condition
Unknown itself. Nodes where none of the DaemonSet's pods ran keep theirs.

The chart runs it as a pre-delete hook of helm uninstall, before helm
deletes the ServiceAccount and the role the pods write with; helm deletes
the rest afterwards. It needs to get and delete the DaemonSet, list its
pods, and get nodes and patch nodes/status.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if daemonSet == "" {
				return errors.New("--daemonset: required")
			}
			if namespace == "" {
				b, err := os.ReadFile(serviceAccountNamespace)
				if err != nil {
					return errors.New("--namespace: required outside a pod")
				}
				namespace = strings.TrimSpace(string(b))
			}
			cfg, err := uninstallConfig(kubeconfig, inCluster)
			if err != nil {
				return err
			}
			cfg.UserAgent = "pleg/" + version.Get().Version + " (uninstall)"
			cfg.Timeout = 30 * time.Second
			client, err := newUninstallClient(cfg)
			if err != nil {
				return err
			}
			res, err := kubereport.Uninstall(cmd.Context(), client, kubereport.UninstallOptions{
				Namespace: namespace, DaemonSet: daemonSet, Wait: wait, Log: g.log,
			})
			if err != nil {
				return fmt.Errorf("pleg uninstall: %w", err)
			}
			if !res.Found {
				g.printf("DaemonSet %s/%s: not found, nothing to stop\n", namespace, daemonSet)
				return nil
			}
			g.printf("DaemonSet %s/%s deleted: %d pods stopped, %d still there after %v\n",
				namespace, daemonSet, len(res.Stopped), len(res.Left), wait)
			g.printf("nodes whose pod set the condition Unknown: %d %v\n", len(res.SaidStopped), res.SaidStopped)
			g.printf("nodes whose condition was set Unknown here: %d %v\n", len(res.Marked), res.Marked)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&daemonSet, "daemonset", "", "pleg's DaemonSet (the chart's: the release's full name)")
	f.StringVar(&namespace, "namespace", "", "its namespace (default: the pod's own)")
	f.DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the pods to stop")
	f.StringVar(&kubeconfig, "kubeconfig", "", "the API server and credentials of this kubeconfig file")
	f.BoolVar(&inCluster, "in-cluster", false, "the pod's service account (the default without --kubeconfig)")
	return cmd
}

// uninstallConfig is the kubeconfig's configuration, or the pod's.
func uninstallConfig(kubeconfig string, inCluster bool) (*rest.Config, error) {
	switch {
	case kubeconfig != "" && inCluster:
		return nil, errors.New("--kubeconfig and --in-cluster: want one of them")
	case kubeconfig != "":
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, and not in a pod: %w", err)
	}
	return cfg, nil
}

// uninstallClient is the two API groups pleg uninstall calls. Not
// client-go's whole clientset: its constructor links every group's
// client, 9 MB of the binary.
type uninstallClient struct {
	apps appsv1client.AppsV1Interface
	core corev1client.CoreV1Interface
}

func (c uninstallClient) AppsV1() appsv1client.AppsV1Interface { return c.apps }
func (c uninstallClient) CoreV1() corev1client.CoreV1Interface { return c.core }

func newUninstallClient(cfg *rest.Config) (uninstallClient, error) {
	apps, err := appsv1client.NewForConfig(cfg)
	if err != nil {
		return uninstallClient{}, err
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return uninstallClient{}, err
	}
	return uninstallClient{apps: apps, core: core}, nil
}
