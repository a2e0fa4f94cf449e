// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package termsafe

import (
	"encoding/json"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"web-0", "web-0"},
		{"héllo wörld", "héllo wörld"},
		{"\x1b[2J", `\x1b[2J`},
		{"a\tb", `a\tb`},
		{"title\a", `title\a`},
		{"\u009b31m", `\u009b31m`},
		{"evil\u202etxt", `evil\u202etxt`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"\ufffd is kept", "\ufffd is kept"},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestJSONKeepsItsMeaning(t *testing.T) {
	for _, in := range []string{"plain", "\u007f del", "\u009b31m", "rtl\u202e", "emoji \U0001F600", "\U000E0041 tag"} {
		data, err := json.Marshal(map[string]string{"v": in})
		if err != nil {
			t.Fatal(err)
		}
		out := JSON(data)
		var back map[string]string
		if err := json.Unmarshal(out, &back); err != nil || back["v"] != in {
			t.Errorf("JSON(%s) = %s: reads back %q, %v", data, out, back["v"], err)
		}
		for _, r := range string(out) {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u202e' || r == '\U000E0041' {
				t.Errorf("JSON(%s) = %s: %U left raw", data, out, r)
			}
		}
	}
}
