// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doccmd

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Who runs the commands: a package of tests that runs what is assigned to
// it, as written up to the substitutions it documents, or nobody (By
// empty) with the reason.
const (
	// ByDocs is test/docs: the pleg CLI, the simulator, go and make, on
	// this machine.
	ByDocs = "test/docs"
	// ByNode is test/kube/node: kubectl, helm and ctr on a real node.
	ByNode = "test/kube/node"
	// ByChart is test/chart: each helm install rendered with its flags.
	ByChart = "test/chart"
	// ByImage is hack/image: make image and pushes to a registry.
	ByImage = "hack/image"
	// BySuite: the command runs tests that make test runs.
	BySuite = "make test"
)

// Assignment gives a test package the commands of a file that match a
// pattern.
type Assignment struct {
	// File is a Markdown file's path from the repository root; a pattern
	// of path.Match.
	File string
	// Command matches the whole command text.
	Command *regexp.Regexp
	// By is the test package that runs them; empty for a command no test
	// runs.
	By string
	// Why says, for a command no test runs, why; for make test's, which.
	Why string
}

// Assignments are the project's: every command of its Markdown matches
// exactly one.
func Assignments() []Assignment {
	re := func(s string) *regexp.Regexp { return regexp.MustCompile(`^(?:` + s + `)$`) }
	return []Assignment{
		{File: "*", By: ByDocs,
			Command: re(`go run \./cmd/pleg .*|go build \./cmd/pleg|make (demo|build)|pleg .*|curl .*|crictl .*`)},
		{File: "*", Command: re(`make test`), By: BySuite, Why: "it is the suite (.ci/run)"},
		{File: "docs/testing.md", Command: re(`go test \./sim/ -run TestCritest -v`), By: BySuite, Why: "sim's TestCritest"},
		{File: "docs/testing.md", Command: re(`critest .*`), By: BySuite,
			Why: "sim's TestCritest runs critest against the simulator with this registry, and checks the specs that fail"},
		{File: "docs/*.md", Command: re(`cd test/kube && CI=true go test .*`), By: BySuite,
			Why: "make test runs test/kube's packages"},
		{File: "docs/*.md", Command: re(`cd test/otel && go test \./\.\.\.`), By: BySuite, Why: "make test runs test/otel"},
		{File: "docs/*.md", Command: re(`(cd \S+ && )?([A-Z_]+=('[^']*'|\S+) )*go test -run '\^\$' -bench .*`),
			Why: "a benchmark, whose figures the page gives; make test runs none (speed is measured, never asserted)"},
		{File: "*", Command: re(`helm install .*`), By: ByChart},
		{File: "*", By: ByNode, Command: re(strings.Join([]string{
			`kubectl (apply|label|get|delete|describe|exec|logs|pleg|-n) .*`, `helm uninstall .*`, `ctr .*`,
			`make image IMAGE_TAG=v0\.1\.0`, `/opt/pleg/bin/pleg .*`, `NODE=.*`, `POD=.*`,
		}, "|"))},
		{File: "docs/runbook.md", Command: re(`kubectl debug .*`),
			Why: "the debug pod's image (busybox) comes from a registry, which this machine cannot reach"},
		{File: "*", Command: re(`make image|crane push .*`), By: ByImage},
		{File: "docs/kubernetes.md", Command: re(`skopeo .*|oras .*`),
			Why: "skopeo and oras are not built here; crane's push of the same layout is run"},
		{File: "docs/fleet.md", Command: re(`(FLEET_OUT=\S+ )?make fleet.*`),
			Why: "a 10-to-200-node harness of about 25 minutes; its figures are in docs/fleet.md"},
		{File: "docs/testing.md", Command: re(`hack/cold-test\.sh.*|cd test/kube && GOCACHE=.* go run \./prebuild`),
			Why: "a cold make test (most of an hour of both cores) or a cold build in fresh caches; " +
				"the figures they gave are on that page"},
		{File: "docs/kubelet-on-sim.md", Command: re(`sudo make kubelet-on-sim.*`),
			Why: "minutes per size; make test runs the same kubelet on the simulator at 100 pods (test/kube/simnode)"},
	}
}

// Assign finds each command's assignment. It returns an error for a
// command that matches none, or more than one, so that a new command in
// the docs needs a test, or a reason, before it lands.
func Assign(cmds []Command) (map[*Command]Assignment, error) {
	var errs []string
	got := make(map[*Command]Assignment, len(cmds))
	for i := range cmds {
		c := &cmds[i]
		var match []Assignment
		for _, a := range Assignments() {
			if ok, _ := filepath.Match(a.File, c.File); (ok || a.File == "*") && a.Command.MatchString(c.Text) {
				match = append(match, a)
			}
		}
		switch len(match) {
		case 0:
			errs = append(errs, fmt.Sprintf("%s: no test runs it (internal/testing/doccmd.Assignments)", c))
		case 1:
			got[c] = match[0]
		default:
			var by []string
			for _, m := range match {
				by = append(by, m.By+" "+m.Command.String())
			}
			errs = append(errs, fmt.Sprintf("%s: assigned %d times: %s", c, len(match), strings.Join(by, "; ")))
		}
	}
	if len(errs) > 0 {
		return got, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return got, nil
}

// For returns the commands assigned to a test package, from the Markdown
// of the repository at root, in file and line order.
func For(root, by string) ([]Command, error) {
	cmds, err := Load(root)
	if err != nil {
		return nil, err
	}
	assigned, err := Assign(cmds)
	if err != nil {
		return nil, err
	}
	var mine []Command
	for i := range cmds {
		if a, ok := assigned[&cmds[i]]; ok && a.By == by {
			mine = append(mine, cmds[i])
		}
	}
	return mine, nil
}
