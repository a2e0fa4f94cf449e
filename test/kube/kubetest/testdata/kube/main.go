// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kube is etcd and the Kubernetes components the tests run,
// linked as one program, as hyperkube once was: the component is the name
// it is started by (kubetest links each name to it), or else its first
// argument. One link instead of six saves minutes of a cold build and
// gigabytes of cache; each component is its release's own command,
// started as its main package starts it.
//
// It lives under testdata so that ./... (go vet, golangci-lint, go test)
// leaves it out: only kubetest builds it, into the runtimes' cache.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // kube-apiserver and kube-controller-manager: CronJob time zones

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
)

// components are the mains, each as its release's cmd/<name>/main.go has it.
var components = map[string]func(){
	"etcd": func() { etcdmain.Main(os.Args) },
	"kube-apiserver": func() {
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	},
	"kube-controller-manager": func() {
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	},
	"kube-scheduler": func() {
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	},
	"kubelet": func() {
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	},
	"kubectl": func() {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as kubectl's main: the default stays
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	},
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := components[name]; !ok && len(os.Args) > 1 {
		// kube kubelet --flags...: the component is the first argument.
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	run, ok := components[name]
	if !ok {
		names := make([]string, 0, len(components))
		for n := range components {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube COMPONENT [ARGS...], or run it as COMPONENT; components: %v\n", names)
		os.Exit(2)
	}
	run()
}
