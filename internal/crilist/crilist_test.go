// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package crilist

import (
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

func TestMatchLabels(t *testing.T) {
	tests := []struct {
		name             string
		labels, selector map[string]string
		want             bool
	}{
		{"no selector takes all", map[string]string{"a": "1"}, nil, true},
		{"no selector takes unlabelled", nil, nil, true},
		{"equal value", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, true},
		{"every key", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "2"}, true},
		{"other value", map[string]string{"a": "1"}, map[string]string{"a": "2"}, false},
		{"one key of two missing", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, false},
		{"empty value wants the key", nil, map[string]string{"a": ""}, false},
		{"empty value on an empty label", map[string]string{"a": ""}, map[string]string{"a": ""}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchLabels(tt.labels, tt.selector); got != tt.want {
				t.Errorf("MatchLabels(%v, %v) = %v, want %v", tt.labels, tt.selector, got, tt.want)
			}
		})
	}
}

func sandbox(id, uid, name string) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid, Name: name, Namespace: "ns"}}
}

func container(id, sandboxID, uid, podName string) *runtimeapi.Container {
	labels := map[string]string{}
	if uid != "" {
		labels[runtime.PodUIDLabel] = uid
		labels[runtime.PodNameLabel] = podName
		labels[runtime.PodNamespaceLabel] = "ns"
	}
	return &runtimeapi.Container{Id: id, PodSandboxId: sandboxID, Labels: labels}
}

func TestPlacer(t *testing.T) {
	var p Placer
	p.Reset([]*runtimeapi.PodSandbox{sandbox("s1", "u1", "a"), sandbox("", "u2", "b"), sandbox("s3", "", "c"), nil})
	tests := []struct {
		name string
		c    *runtimeapi.Container
		want string
	}{
		{"label", container("c1", "s9", "u5", "e"), "u5"},
		{"label over sandbox", container("c2", "s1", "u5", "e"), "u5"},
		{"sandbox", container("c3", "s1", "", ""), "u1"},
		{"sandbox without ID", container("c4", "", "", ""), ""},
		{"sandbox without pod", container("c5", "s3", "", ""), ""},
		{"unknown sandbox", container("c6", "s7", "", ""), ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.PodUID(tt.c); got != tt.want {
				t.Errorf("PodUID = %q, want %q", got, tt.want)
			}
		})
	}
	// A Reset forgets the sandboxes of the lists before.
	p.Reset([]*runtimeapi.PodSandbox{sandbox("s2", "u2", "b")})
	if got := p.PodUID(container("c3", "s1", "", "")); got != "" {
		t.Errorf("after Reset, PodUID of a container of a sandbox gone = %q, want none", got)
	}
	if got := p.PodUID(container("c7", "s2", "", "")); got != "u2" {
		t.Errorf("after Reset, PodUID = %q, want u2", got)
	}
}

func TestGroup(t *testing.T) {
	type pod struct {
		uid, name             string
		sandboxes, containers []string
	}
	tests := []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		want       []pod
	}{
		{"empty", nil, nil, nil},
		{
			"by metadata and label, in list order",
			[]*runtimeapi.PodSandbox{sandbox("s2", "u2", "b"), sandbox("s1", "u1", "a"), sandbox("s1b", "u1", "a")},
			[]*runtimeapi.Container{container("c1", "s1", "u1", "a"), container("c2", "s2", "u2", "b")},
			[]pod{{"u2", "b", []string{"s2"}, []string{"c2"}}, {"u1", "a", []string{"s1", "s1b"}, []string{"c1"}}},
		},
		{
			"unlabelled container by its sandbox",
			[]*runtimeapi.PodSandbox{sandbox("s1", "u1", "a")},
			[]*runtimeapi.Container{container("c1", "s1", "", "")},
			[]pod{{"u1", "a", []string{"s1"}, []string{"c1"}}},
		},
		{
			"container without sandbox names its pod",
			nil,
			[]*runtimeapi.Container{container("c1", "s9", "u3", "c")},
			[]pod{{"u3", "c", nil, []string{"c1"}}},
		},
		{
			"items without ID or pod left out",
			[]*runtimeapi.PodSandbox{sandbox("", "u1", "a"), sandbox("s2", "", "b"), nil},
			[]*runtimeapi.Container{container("", "s2", "u1", "a"), container("c2", "s2", "", ""), nil},
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []pod
			for _, p := range Group(tt.sandboxes, tt.containers) {
				g := pod{uid: p.UID, name: p.Name}
				for _, sb := range p.Sandboxes {
					g.sandboxes = append(g.sandboxes, sb.GetId())
				}
				for _, c := range p.Containers {
					g.containers = append(g.containers, c.GetId())
				}
				got = append(got, g)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b pod) bool {
				return a.uid == b.uid && a.name == b.name && slices.Equal(a.sandboxes, b.sandboxes) &&
					slices.Equal(a.containers, b.containers)
			}) {
				t.Errorf("Group:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
