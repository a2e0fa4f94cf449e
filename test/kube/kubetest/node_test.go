// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubetest

import "testing"

func TestFeatureGates(t *testing.T) {
	tests := []struct {
		name  string
		gates map[string]bool
		want  string
	}{
		{name: "none", want: ""},
		{name: "sorted", gates: map[string]bool{"EventedPLEG": true, "AllAlpha": false},
			want: "featureGates:\n  AllAlpha: false\n  EventedPLEG: true\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := featureGates(tt.gates); got != tt.want {
				t.Errorf("featureGates(%v) = %q, want %q", tt.gates, got, tt.want)
			}
		})
	}
}
