// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func spec(state string, path ...string) critestSpec {
	sp := critestSpec{ContainerHierarchyTexts: path[:len(path)-1], LeafNodeType: "It", LeafNodeText: path[len(path)-1], State: state}
	if state == "failed" {
		sp.Failure.Message = "it broke"
	}
	return sp
}

func TestCompareCritest(t *testing.T) {
	impossible := map[string]string{"[k8s.io] Streaming exec": "exec"}
	tests := []struct {
		name  string
		specs []critestSpec
		// want are substrings of the problems, one each, in order.
		want                                  []string
		passed, failed, listedFailed, skipped int
	}{
		{
			name:   "listed spec fails, others pass",
			specs:  []critestSpec{spec("failed", "[k8s.io] Streaming", "exec"), spec("passed", "[k8s.io] Pod", "runs")},
			passed: 1, failed: 1, listedFailed: 1,
		},
		{
			name: "unlisted spec fails",
			specs: []critestSpec{
				spec("failed", "[k8s.io] Streaming", "exec"),
				spec("failed", "[k8s.io] Pod", "runs"),
				spec("timedout", "[k8s.io] Pod", "stops"),
			},
			want:   []string{"critest spec failed: [k8s.io] Pod runs\n    it broke", "critest spec timedout: [k8s.io] Pod stops"},
			failed: 3, listedFailed: 1,
		},
		{
			name:   "listed spec passes",
			specs:  []critestSpec{spec("passed", "[k8s.io] Streaming", "exec")},
			want:   []string{"listed as impossible (exec) but passes: remove it from the list: [k8s.io] Streaming exec"},
			passed: 1,
		},
		{
			name:    "listed spec skipped",
			specs:   []critestSpec{spec("skipped", "[k8s.io] Streaming", "exec")},
			want:    []string{"listed as impossible but critest skipped it"},
			skipped: 1,
		},
		{
			name:   "listed spec gone",
			specs:  []critestSpec{spec("passed", "[k8s.io] Pod", "runs")},
			want:   []string{"critest has no such spec: [k8s.io] Streaming exec"},
			passed: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compareCritest(tt.specs, impossible)
			if len(c.problems) != len(tt.want) {
				t.Fatalf("problems %q, want %d", c.problems, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(c.problems[i], w) {
					t.Errorf("problem %d: %q, want it to say %q", i, c.problems[i], w)
				}
			}
			if c.passed != tt.passed || c.failed != tt.failed || c.listedFailed != tt.listedFailed || c.skipped != tt.skipped {
				t.Errorf("counts %+v, want passed %d failed %d listed %d skipped %d",
					c, tt.passed, tt.failed, tt.listedFailed, tt.skipped)
			}
		})
	}
}

func TestReadImpossible(t *testing.T) {
	tests := []struct {
		name, content string
		want          map[string]string
		wantErr       string
	}{
		{
			name:    "comments and blanks",
			content: "# why\n\n[k8s.io] A b | exec: no process\n  [k8s.io] C d  |  logs \n",
			want:    map[string]string{"[k8s.io] A b": "exec: no process", "[k8s.io] C d": "logs"},
		},
		{name: "no reason", content: "[k8s.io] A b\n", wantErr: ":1: want"},
		{name: "empty reason", content: "[k8s.io] A b | \n", wantErr: ":1: want"},
		{name: "twice", content: "a | x\na | y\n", wantErr: ":2: \"a\" listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "list.txt")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := readImpossible(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("%v, %v; want %v", got, err, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%q: reason %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestCritestFilesParse keeps the committed list and registry readable
// even where critest is not run (-short).
func TestCritestFilesParse(t *testing.T) {
	list, err := readImpossible(filepath.Join("testdata", "critest-impossible.txt"))
	if err != nil || len(list) == 0 {
		t.Fatalf("impossible list: %d specs, %v", len(list), err)
	}
	reg, err := LoadRegistry(filepath.Join("testdata", "critest-registry.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := (Options{Registry: reg}).Validate(); err != nil {
		t.Fatal(err)
	}
}
