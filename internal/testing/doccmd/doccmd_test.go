// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doccmd

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   string
		want []string // "line: text"
		err  string
	}{
		{
			name: "sh block: every line but comments",
			md:   "text\n```sh\n# a comment\nmake test   # the suite\n\nkubectl get pods\n```\n",
			want: []string{"4: make test", "6: kubectl get pods"},
		},
		{
			name: "continuations joined",
			md:   "```sh\nhelm install pleg ./charts/pleg \\\n  --set a=b \\\n  --set c=d\nkubectl get nodes |\nwhile read -r n; do echo $n; done\n```\n",
			want: []string{"2: helm install pleg ./charts/pleg --set a=b --set c=d", "5: kubectl get nodes | while read -r n; do echo $n; done"},
		},
		{
			name: "console block: the prompted lines only",
			md:   "```\n$ pleg pods -r unix:///tmp/sim.sock\nNAME   ID\n$ curl -i localhost:9847/healthz\nHTTP/1.1 200 OK\n```\n",
			want: []string{"2: pleg pods -r unix:///tmp/sim.sock", "4: curl -i localhost:9847/healthz"},
		},
		{
			name: "a hash inside quotes is not a comment",
			md:   "```sh\nawk -F'\\t' '$2 == \"#x\"' # count\n```\n",
			want: []string{"2: awk -F'\\t' '$2 == \"#x\"'"},
		},
		{
			name: "other languages hold no command",
			md:   "```yaml\nmake: test\n```\n```go\nfunc Example() {}\n```\n",
		},
		{
			name: "commands without their sh mark",
			md:   "```\nkubectl get pods\n```\n",
			err:  "without its sh mark",
		},
		{
			name: "a continuation past the block",
			md:   "```sh\nmake \\\n```\n",
			err:  "goes on past its block",
		},
		{
			name: "an unclosed block",
			md:   "```sh\nmake test\n",
			err:  "not closed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmds, err := Parse("x.md", tc.md)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cmds {
				got = append(got, strings.TrimPrefix(c.String(), "x.md:"))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestEveryCommandAssigned: every command of the project's Markdown has
// exactly one test that runs it, or a reason why none does.
func TestEveryCommandAssigned(t *testing.T) {
	cmds, err := Load("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("no command found in the project's Markdown")
	}
	assigned, err := Assign(cmds)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cmds {
		a := assigned[&cmds[i]]
		if a.By == "" && a.Why == "" {
			t.Errorf("%s: run by no test, and no reason given", &cmds[i])
		}
		if a.By == "" {
			t.Logf("not run: %s (%s)", &cmds[i], a.Why)
		}
	}
}
