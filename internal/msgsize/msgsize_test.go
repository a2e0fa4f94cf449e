// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package msgsize

import "testing"

func TestSpelling(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Bytes(512), "512 B"},
		{Bytes(1536), "1.5 KiB"},
		{Bytes(KubeletMax), "16.00 MiB"},
		{Bytes(17 << 20), "17.00 MiB"},
		{MiB(KubeletMax, -1), "16 MiB"},
		{MiB(24<<20+1<<19, -1), "24.5 MiB"},
		{MiB(12_700_000, 1), "12.1 MiB"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
