// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plegkit/pleg/internal/testing/doccmd"
	"github.com/plegkit/pleg/internal/testing/helmbin"
)

// TestDocCommands runs every helm install of README.md and docs/ (their
// assignment in internal/testing/doccmd) as written, from the repository's root,
// with helm's --dry-run=client: the chart renders with those values and
// its schema accepts them, without a cluster. test/kube/node installs the
// chart for real.
func TestDocCommands(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := doccmd.For(root, doccmd.ByChart)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("no helm install in the docs")
	}
	// helm in the cache, shared with test/kube's real node: built once per
	// machine, and never twice at once.
	helm, err := helmbin.Build(t.Context(), ".", t.Logf)
	if err != nil {
		t.Fatalf("building helm: %v", err)
	}
	bin := t.TempDir()
	if err := os.Symlink(helm, filepath.Join(bin, "helm")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, c := range cmds {
		if !strings.HasPrefix(c.Text, "helm install ") {
			t.Errorf("%s: test/chart runs helm install only", c)
			continue
		}
		t.Run(strings.ReplaceAll(c.File, "/", "_")+":"+itoa(c.Line), func(t *testing.T) {
			text := c.Text + " --dry-run=client"
			cmd := exec.CommandContext(t.Context(), "bash", "-c", text)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
				"HELM_DATA_HOME="+filepath.Join(home, "data"), "KUBECONFIG="+filepath.Join(home, "no-cluster"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", text, err, out)
			}
			if !strings.Contains(string(out), "kind: DaemonSet") {
				t.Errorf("%s renders no DaemonSet:\n%s", text, out)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
