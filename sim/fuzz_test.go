// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"testing"
)

// --churn is outside data: it parses, or is refused with an error; what
// parses has finite, non-negative rates (a Poisson draw of an infinite
// mean never ends) and reads back the same from its String.
func FuzzParseChurn(f *testing.F) {
	for _, seed := range []string{
		"", "crash=2,exit=0.5,pods=0.1,short=1", "crashes=1, exits=2 ,replace=3,tick=50ms",
		"crash=0.5,exit=0.2,pods=0.1,short=0.5", "tick=1h", "crash=1e308", "crash=NaN", "exit=+Inf",
		"crash=-1", "tick=0s", "crash", "=1", ",,", "CRASH=1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseChurn(s)
		if err != nil {
			return
		}
		for _, r := range []float64{c.Crashes, c.CleanExits, c.PodReplacements, c.ShortLived} {
			if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
				t.Fatalf("ParseChurn(%q) = %+v: a rate that is not a finite non-negative number", s, c)
			}
		}
		if err := c.validate(); err != nil {
			t.Fatalf("ParseChurn(%q) = %+v, which does not validate: %v", s, c, err)
		}
		again, err := ParseChurn(c.String())
		if err != nil || again != c {
			t.Fatalf("ParseChurn(%q) = %+v; its String %q parses as %+v, %v", s, c, c.String(), again, err)
		}
	})
}

// --faults is outside data too: it parses or is refused; what parses
// validates, and its String parses back to the same String.
func FuzzParseFaults(f *testing.F) {
	for _, seed := range []string{
		"", "none", "error=container_status:0.05,hang=list_containers,drop=30s,oversize,malformed=nil-metadata:2",
		"error=*:1,error-code=resource-exhausted", "hang-pod=uid-1,slow-pod=uid-2:300ms",
		"events=unimplemented", "malformed=duplicate-ids", "malformed=unknown-state:0",
		"error=version:NaN", "error=version:2", "slow-pod=:1s", "slow-pod=a:b:1s", "drop=-1s", "oversize=1",
		"error-code=Unavailable", "hang=", "x=y",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		faults, err := ParseFaults(s)
		if err != nil {
			return
		}
		if err := faults.validate(); err != nil {
			t.Fatalf("ParseFaults(%q) = %+v, which does not validate: %v", s, faults, err)
		}
		for op, r := range faults.ErrorRate {
			if math.IsNaN(r) {
				t.Fatalf("ParseFaults(%q): error rate of %s is NaN", s, op)
			}
		}
		text := faults.String()
		again, err := ParseFaults(text)
		if err != nil || again.String() != text {
			t.Fatalf("ParseFaults(%q): its String %q parses as %q, %v", s, text, again.String(), err)
		}
	})
}
