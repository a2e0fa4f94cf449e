// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"slices"
	"strings"
	"testing"
)

// journal.retention is pleg run's --event-retention, off unless set; the
// schema refuses what the flag would.
func TestJournalRetention(t *testing.T) {
	for retention, want := range map[string]string{"": "", "7d": "--event-retention=7d", "36h": "--event-retention=36h",
		"1w2d": "--event-retention=1w2d"} {
		_, c := mustRender(t, "pleg", "kube-system", map[string]any{"journal": map[string]any{"retention": retention}}).daemonSet(t)
		i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--event-retention") })
		switch {
		case want == "" && i >= 0:
			t.Errorf("retention %q: %s, want no --event-retention", retention, c.Args[i])
		case want != "" && (i < 0 || c.Args[i] != want):
			t.Errorf("retention %q: args %v, want %s", retention, c.Args, want)
		}
	}
	for _, bad := range []string{"a week", "-1h", "1.5h", "7 d"} {
		_, err := renderChart("pleg", "kube-system", map[string]any{"journal": map[string]any{"retention": bad}})
		if err == nil || !strings.Contains(err.Error(), "retention") {
			t.Errorf("retention %q: error %v, want one naming retention", bad, err)
		}
	}
}
