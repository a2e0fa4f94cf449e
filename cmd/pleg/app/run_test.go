// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/plegkit/pleg/runtime/cri"
)

// --max-list-size takes a quantity, refuses what could not list a node,
// and reaches the runtime's limits.
func TestMaxListSize(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		err   string
	}{
		{value: "64Mi", want: 64 << 20},
		{value: "16777216", want: 16 << 20},
		{value: "1Gi", want: 1 << 30},
		{value: "512Ki", err: "want from 1Mi to 2Gi"},
		{value: "4Gi", err: "want from 1Mi to 2Gi"},
		{value: "lots", err: "want a size such as 24Mi"},
	} {
		n := cri.DefaultMaxListBytes
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fs.Var(byteSize{&n}, "max-list-size", "")
		err := fs.Parse([]string{"--max-list-size", tc.value})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--max-list-size %s: %v, want %q", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil || n != tc.want {
			t.Errorf("--max-list-size %s: %d, %v; want %d", tc.value, n, err, tc.want)
		}
	}

	g := &global{endpoint: "unix:///nonexistent.sock", maxListBytes: 64 << 20}
	rt, err := g.runtime(0)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if got := rt.ListSizes().LimitBytes; got != 64<<20 {
		t.Errorf("the runtime accepts messages of %d bytes, want the flag's %d", got, 64<<20)
	}
	if got := (byteSize{&g.maxListBytes}).String(); got != "64Mi" {
		t.Errorf("the flag shows %q", got)
	}
}

// pleg run keeps its journal in memory unless given --state-dir, so that a
// run by hand never shares the installed one's; every installed pleg
// passes /var/lib/pleg.
func TestStateDirIsAskedFor(t *testing.T) {
	cmd := NewCommand(io.Discard, io.Discard)
	run, _, err := cmd.Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	if def := run.Flags().Lookup("state-dir").DefValue; def != "" {
		t.Errorf("--state-dir defaults to %q, want none (in memory)", def)
	}
	for _, path := range []string{"../../../deploy/pleg.service", "../../../deploy/daemonset.yaml", "../../../charts/pleg/templates/daemonset.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "--state-dir") {
			t.Errorf("%s does not pass --state-dir: it would keep its journal in memory", path)
		}
	}
}
