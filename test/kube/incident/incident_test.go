// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package incident drives a real kubelet to "PLEG is not healthy" by the
// causes seen in the field (../shared's incidents.md in the project's
// notes, docs/incidents.md in the repository), with pleg installed on the
// node by its chart as an operator installs it, a real Prometheus
// evaluating the chart's rules at the chart's scrape interval, and
// measures, cause by cause: when pleg's condition turned on, when the
// first page fired, when the kubelet turned the node NotReady and why (or
// that it stayed Ready), what `pleg doctor` named first, and what the
// flight recording taken at the onset holds.
//
// Each cause runs on a node of its own (a kubelet on a private runtime,
// in one cluster), so that the causes run side by side and a fault never
// reaches beyond its node; each lifts its fault when it ends, failed or
// not; a cause whose fault the whole machine feels (the disk throttled)
// runs after the others, alone. PLEG_INCIDENTS chooses the causes: a
// comma-separated list, "all" (make incidents), or by default those make
// test runs: the runtime stopped, and a shim stopped, a cause below the
// CRI.
package incident

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plegkit/pleg/test/kube/kubetest"
)

// incidentsEnv chooses the causes to run.
const incidentsEnv = "PLEG_INCIDENTS"

// TestIncidents runs each chosen cause on its node and prints the table
// of docs/incidents.md for them.
func TestIncidents(t *testing.T) {
	chosen := choose(t, os.Getenv(incidentsEnv))
	var nodes []kubetest.NodeOptions
	for _, c := range chosen {
		no := kubetest.NodeOptions{Name: c.node(), Kubelet: c.kubelet}
		if c.prepare != nil {
			c.prepare(t, &no)
		}
		nodes = append(nodes, no)
	}
	cl := kubetest.StartCluster(t, kubetest.ClusterOptions{Network: "10.245", BridgePrefix: "plegin", Nodes: nodes})
	// A run that died (a timeout, a kill) leaves its faults; lift them
	// first: its throttled processes would not even be killed. Not before
	// the cluster has its network's lock: another run that is alive holds
	// it, and its faults are its own.
	if err := sweepConfinements(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	env := setUp(t, ctx, cl)

	var mu sync.Mutex
	var rows []row
	run := func(t *testing.T, c *cause) {
		r := env.run(t, ctx, c)
		mu.Lock()
		rows = append(rows, r)
		mu.Unlock()
	}
	t.Run("causes", func(t *testing.T) {
		for _, c := range chosen {
			if !c.alone {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					run(t, c)
				})
			}
		}
	})
	// A cause whose fault the whole machine feels runs once the others
	// have ended: beside them, their doctor would read its pressure.
	for _, c := range chosen {
		if c.alone {
			t.Run("alone/"+c.name, func(t *testing.T) { run(t, c) })
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.name, b.name) })
	t.Logf("the incidents, as docs/incidents.md tabulates them:\n%s", table(rows))
	if env.healthyPages() {
		t.Error("a page fired for a node before its fault: see the log above")
	}
}

// choose returns the causes spec names: all, a list, or make test's.
func choose(t *testing.T, spec string) []*cause {
	t.Helper()
	all := causes()
	switch spec {
	case "":
		var out []*cause
		for _, c := range all {
			if c.inMakeTest {
				out = append(out, c)
			}
		}
		return out
	case "all":
		return all
	}
	var out []*cause
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(c *cause) bool { return c.name == name })
		if i < 0 {
			var names []string
			for _, c := range all {
				names = append(names, c.name)
			}
			t.Fatalf("%s=%q: no cause %q; the causes: all, %s", incidentsEnv, spec, name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out
}

// table is the measured rows as Markdown.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| cause | runtime | pleg's condition | first page | kubelet | doctor's first finding | recording |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
			r.name, r.runtime, r.condition(), r.page(), r.kubelet(), r.finding, r.recording)
	}
	return b.String()
}
