// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestDeployAppliesBothWays builds deploy/ as `kubectl apply -k deploy/`
// does (kustomize, as kubectl embeds it), and reads it as `kubectl apply
// -f deploy/` does (every .json, .yaml and .yml file, each document an
// object): both give the same Kubernetes objects, and -f meets nothing
// that is not one (the rules, their tests, the dashboard and the
// kustomization live where it does not look).
func TestDeployAppliesBothWays(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), deployDir)
	if err != nil {
		t.Fatalf("kubectl apply -k deploy/: %v", err)
	}
	var built []string
	for _, r := range m.Resources() {
		built = append(built, r.GetKind()+" "+r.GetNamespace()+"/"+r.GetName())
	}

	var read []string
	entries, err := os.ReadDir(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".json" && ext != ".yaml" && ext != ".yml") {
			continue // kubectl apply -f DIR reads these extensions alone, and no subdirectory
		}
		data, err := os.ReadFile(filepath.Join(deployDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocuments(data) {
			objs, err := parseObjects(doc)
			if err != nil {
				t.Fatalf("kubectl apply -f deploy/: %s, document %d: %v", e.Name(), i+1, err)
			}
			if len(objs) == 0 && strings.TrimSpace(stripComments(string(doc))) != "" {
				t.Errorf("kubectl apply -f deploy/: %s, document %d is not a Kubernetes object", e.Name(), i+1)
			}
			for _, o := range objs {
				read = append(read, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
			}
		}
	}
	slices.Sort(built)
	slices.Sort(read)
	if len(read) == 0 || !slices.Equal(built, read) {
		t.Errorf("apply -k deploy/ gives %v\napply -f deploy/ gives %v", built, read)
	}
	t.Logf("%d objects both ways", len(read))
}

// stripComments drops a YAML document's comment lines.
func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}
