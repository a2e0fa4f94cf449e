// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"strings"
	"testing"
)

// The export is off by default; on, it needs an endpoint, and takes the
// protocols and compressions pleg knows only.
func TestOTLPValues(t *testing.T) {
	for _, tc := range []struct {
		otlp map[string]any
		want string
	}{
		{map[string]any{"enabled": true}, "endpoint"},
		{map[string]any{"enabled": true, "endpoint": "c:4317", "protocol": "http/json"}, "protocol"},
		{map[string]any{"enabled": true, "endpoint": "c:4317", "compression": "zstd"}, "compression"},
		{map[string]any{"enabled": true, "endpoint": "c:4317", "batchSize": 0}, "batchSize"},
	} {
		_, err := renderChart("pleg", "kube-system", map[string]any{"otlp": tc.otlp})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("otlp %v: %v, want an error about %s", tc.otlp, err, tc.want)
		}
	}
	r := mustRender(t, "pleg", "kube-system", nil)
	if g := r.golden(); strings.Contains(g, "otlp") {
		t.Errorf("the defaults mention otlp: the export must be off by default")
	}
}
