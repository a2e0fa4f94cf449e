// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/plegkit/pleg/internal/testing/doccmd"
)

// docCommands are the commands of README.md and docs/ that this node runs
// (internal/testing/doccmd.Assignments: kubectl, helm uninstall, ctr, make image
// for the node), each step taking those of the blocks it names, and a last
// check that every one was run.
type docCommands struct {
	mu   sync.Mutex
	all  []doccmd.Command
	done map[string]bool // "file:line"
}

func loadDocCommands(t *testing.T) *docCommands {
	t.Helper()
	all, err := doccmd.For(repoRoot(), doccmd.ByNode)
	if err != nil {
		t.Fatal(err)
	}
	return &docCommands{all: all, done: map[string]bool{}}
}

// take returns the commands of file whose text matches one of the
// prefixes, in order, and notes them run.
func (d *docCommands) take(t *testing.T, file string, prefixes ...string) []doccmd.Command {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var got []doccmd.Command
	for _, c := range d.all {
		if c.File != file {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(c.Text, p) {
				got = append(got, c)
				d.done[fmt.Sprintf("%s:%d", c.File, c.Line)] = true
				break
			}
		}
	}
	if len(got) == 0 {
		t.Fatalf("%s has no command starting with %q: the step's commands moved", file, prefixes)
	}
	return got
}

// left are the commands no step took.
func (d *docCommands) left() []doccmd.Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	var left []doccmd.Command
	for _, c := range d.all {
		if !d.done[fmt.Sprintf("%s:%d", c.File, c.Line)] {
			left = append(left, c)
		}
	}
	return left
}

// shell runs commands of the docs in bash, in order, stopping at the first
// that fails, from the repository's root (the docs' paths are relative to
// it, unless dir is given), as an operator with this cluster's admin kubeconfig on this node:
// kubectl, helm and ctr on PATH, ctr at this node's containerd. edit
// adapts a line to this node (its name, its runtime's socket); the
// commands' output is returned.
func (c *cluster) shell(t *testing.T, ctx context.Context, dir string, cmds []doccmd.Command, edit func(string) string) string {
	t.Helper()
	bin := t.TempDir()
	tools := map[string]string{"kubectl": c.bin.Kubectl, "helm": c.Helm, "ctr": c.runtime.Bin.Ctr}
	if c.plugin != "" {
		tools["kubectl-pleg"] = c.plugin
	}
	for name, path := range tools {
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, cmd := range cmds {
		line := cmd.Text
		if edit != nil {
			line = edit(line)
		}
		t.Logf("%s:%d: %s", cmd.File, cmd.Line, line)
		script.WriteString(line + "\n")
	}
	sh := exec.CommandContext(ctx, "bash", "-c", script.String())
	sh.Dir = repoRoot()
	if dir != "" {
		sh.Dir = dir
	}
	sh.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+c.kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(c.server.Dir(), "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.server.Dir(), "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(c.server.Dir(), "helm-data"),
		// ctr reads its containerd, and the snapshotter this one unpacks
		// with, from the environment.
		"CONTAINERD_ADDRESS="+strings.TrimPrefix(c.runtime.Endpoint, "unix://"),
		"CONTAINERD_SNAPSHOTTER=native")
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the docs' commands:\n%s\nfailed: %v\n%s", script.String(), err, out)
	}
	return string(out)
}

// exampleNode is a node's name in the docs' examples.
var exampleNode = regexp.MustCompile(`\bnode-\d+\b`)

// onThisNode adapts a command of the docs to this node: the docs' example
// node is this one, the runtime's socket this runtime's, and the exit code
// of pleg doctor (kubectl pleg doctor, recordings), its verdict (2, 1 or
// 0), an answer.
func (c *cluster) onThisNode(line string) string {
	line = exampleNode.ReplaceAllLiteralString(line, nodeName)
	line = strings.ReplaceAll(line, "unix:///run/containerd/containerd.sock", c.runtime.Endpoint)
	if strings.Contains(line, "pleg doctor") || strings.Contains(line, "pleg recordings") {
		line += " || [ $? -le 2 ]"
	}
	return line
}
