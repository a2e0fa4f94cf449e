// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart, from this module's directory.
const chartDir = "../../charts/pleg"

// rendered is the chart rendered for a release: each template's output
// by template name ("daemonset.yaml"), and the objects they hold.
type rendered struct {
	files   map[string]string
	objects []*unstructured.Unstructured
	// notes is NOTES.txt, what helm install prints.
	notes string
}

// kubeVersion is the cluster's version the renders are made for, as
// `helm template --kube-version` has it: one the admission policy
// (Kubernetes 1.30 and later) renders on. helm's own default in a test
// binary is 1.20.
const kubeVersion = "v1.33.0"

// renderChart renders the chart as `helm template` does, for a release
// named name in namespace, with values over the chart's defaults, for a
// cluster of kubeVersion.
func renderChart(name, namespace string, values map[string]any) (rendered, error) {
	return renderChartFor(kubeVersion, name, namespace, values)
}

// renderChartFor renders the chart for a cluster of version kube.
func renderChartFor(kube, name, namespace string, values map[string]any) (rendered, error) {
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return rendered{}, err
	}
	kv, err := common.ParseKubeVersion(kube)
	if err != nil {
		return rendered{}, err
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	vals, err := util.ToRenderValues(ch, values, common.ReleaseOptions{Name: name, Namespace: namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		return rendered{}, err
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		return rendered{}, err
	}
	r := rendered{files: map[string]string{}}
	for _, file := range slices.Sorted(maps.Keys(out)) {
		base := path.Base(file)
		if base == "NOTES.txt" {
			r.notes = out[file]
		}
		if !strings.HasSuffix(base, ".yaml") || strings.HasPrefix(base, "_") || strings.TrimSpace(out[file]) == "" {
			continue // NOTES.txt, helpers, and what the values turned off
		}
		r.files[base] = out[file]
		objs, err := parseObjects([]byte(out[file]))
		if err != nil {
			return r, fmt.Errorf("%s: %w", file, err)
		}
		r.objects = append(r.objects, objs...)
	}
	return r, nil
}

// parseObjects parses the Kubernetes objects of a multi-document YAML
// stream; documents without apiVersion and kind (comments alone, a rule
// file) are skipped.
func parseObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, doc := range splitDocuments(data) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			continue
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for line := range bytes.Lines(data) {
		if bytes.Equal(bytes.TrimRight(line, " \r\n"), []byte("---")) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

// sourceHeader starts each template's output in a golden render, as in
// `helm template`'s output.
const sourceHeader = "# Source: pleg/templates/"

// golden is a render as testdata/ holds it: each template's output after a
// "---" and a Source line, in template order.
func (r rendered) golden() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(r.files)) {
		b.WriteString("---\n" + sourceHeader + name + "\n")
		b.WriteString(strings.TrimLeft(r.files[name], "\n"))
		if !strings.HasSuffix(r.files[name], "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// helmOnlyLabels are the labels that say Helm manages an object: the
// plain manifests in deploy/ leave them out, since kubectl or kustomize
// applies those.
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}

// plainManifest is a template's output as deploy/ holds it: a header that
// says where it comes from, without the labels that say Helm manages it.
func plainManifest(template, content string) string {
	var b strings.Builder
	b.WriteString("# Generated from charts/pleg/templates/" + template + " with the chart's default values\n")
	b.WriteString("# (make generate); edit the chart, not this file.\n")
	for line := range strings.Lines(strings.TrimLeft(content, "\n")) {
		key := strings.TrimSpace(line)
		if slices.ContainsFunc(helmOnlyLabels, func(l string) bool { return strings.HasPrefix(key, l+":") }) {
			continue
		}
		b.WriteString(line)
	}
	out := b.String()
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}
