// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command prebuild builds into the runtimes' cache what this module's
// suites run beside the runtimes: etcd and the Kubernetes components (one
// program, see kubetest), then helm from test/chart's go.mod. hack/test.sh
// runs it in the background once the root module's go vet has compiled
// client-go and the rest of what the components share with pleg; see
// internal/testing/prebuild.
//
//	cd test/kube && go run ./prebuild
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/plegkit/pleg/internal/testing/prebuild"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	steps := []prebuild.Step{{
		Name: "etcd and Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl)",
		Cold: "about 15 CPU-minutes",
		Build: func(ctx context.Context, logf func(string, ...any)) error {
			_, err := kubetest.Build(ctx, logf)
			return err
		},
	}, {
		Name: "helm",
		Cold: "about 3 CPU-minutes",
		Build: func(ctx context.Context, logf func(string, ...any)) error {
			_, err := kubetest.BuildHelm(ctx, logf)
			return err
		},
	}}
	if err := prebuild.Run(ctx, os.Stdout, "prebuild (test/kube)", steps); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
