// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The config file is outside data: whatever it holds, applying it ends
// with the flags set or an error that names the file, never a panic.
func FuzzConfig(f *testing.F) {
	for _, seed := range []string{
		"runtime-endpoint: unix:///run/containerd/containerd.sock\nrelist-period: 1s\ninspect-concurrency: 16\n",
		"listen: 127.0.0.1:9847\nserver: unix:///run/pleg.sock\nrun:\n  listen: unix:///run/pleg.sock\npods: 20\n",
		"pod: [a, b]\nnamespace: [x]\ntype: ContainerDied\n",
		"version:\n  timeout: 2s\n",
		"run: [1, 2]\n",
		"pods: {output: json}\n",
		"relist-period: 1e400\n",
		"- a\n- b\n",
		"",
		"{",
		"relist-period: !!binary AAAA\n",
		"a: &x [*x]\n",
	} {
		f.Add("watch", seed)
		f.Add("version", seed)
	}
	f.Fuzz(func(t *testing.T, command, data string) {
		root := NewCommand(io.Discard, io.Discard)
		var cmd *cobra.Command
		for _, c := range root.Commands() {
			if c.Name() == command {
				cmd = c
			}
		}
		if cmd == nil {
			return
		}
		if err := cmd.ParseFlags(nil); err != nil {
			t.Fatal(err)
		}
		if err := applyConfigData(cmd, "pleg.yaml", []byte(data)); err != nil && !strings.HasPrefix(err.Error(), "--config pleg.yaml") {
			t.Errorf("error %q does not name the file", err)
		}
	})
}
