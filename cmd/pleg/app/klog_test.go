// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestKlogGoesThroughTheDaemonsLogger runs pleg run with --log-format
// json and writes to klog, as client-go does, while it runs: the line
// comes out as JSON among the daemon's own, its V(4) lines only at -v 4,
// and klog is put back when the command ends.
func TestKlogGoesThroughTheDaemonsLogger(t *testing.T) {
	for _, verbosity := range []string{"0", "4"} {
		t.Run("-v="+verbosity, func(t *testing.T) {
			var out, errOut syncBuffer
			cmd := NewCommand(&out, &errOut)
			cmd.SetArgs([]string{"run", "--simulate", "--sim-pods=1", "--listen=127.0.0.1:0", "--log-format=json", "-v", verbosity})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()
			waitFor(t, "the daemon serving", func() bool { return strings.Contains(errOut.String(), "Serving the PLEG API") })
			klog.InfoS("Waited before sending request", "delay", "1.2s", "verb", "PATCH")
			klog.V(4).InfoS("Request Body", "body", "{}")
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			klog.InfoS("after the command") // klog's own output again: not in errOut

			seen := map[string]bool{}
			for _, line := range lines(errOut.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Errorf("a line that is not JSON: %q", line)
					continue
				}
				msg, _ := rec["msg"].(string)
				seen[msg] = true
				if msg == "Waited before sending request" && (rec["verb"] != "PATCH" || rec["level"] != "INFO") {
					t.Errorf("klog's line lost its fields: %v", rec)
				}
			}
			if !seen["Waited before sending request"] {
				t.Errorf("klog's line is not in the daemon's log:\n%s", errOut.String())
			}
			if seen["Request Body"] != (verbosity == "4") {
				t.Errorf("-v %s: klog's V(4) line logged: %v", verbosity, seen["Request Body"])
			}
			if seen["after the command"] {
				t.Error("klog still writes to the command's log after it ended")
			}
		})
	}
}
