// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package format spells the figures of a diagnosis the same way in its
// findings and in every rendering of its report.
package format

import (
	"strconv"
	"strings"
	"time"
)

// ShortID shortens a runtime ID as crictl does.
func ShortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

// Seconds is a report's seconds as a duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Duration prints a duration with three significant digits.
func Duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	// Each unit up to what would round to a thousand of it, or a minute.
	case d < 999500*time.Nanosecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < 999500*time.Microsecond:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	case d < 59500*time.Millisecond:
		return sig3(d.Seconds()) + "s"
	}
	return d.Round(time.Second).String()
}

// sig3 prints v, below 1000, with three significant digits, trailing
// zeros dropped.
func sig3(v float64) string {
	decimals := 2
	switch {
	case v >= 99.95:
		decimals = 0
	case v >= 9.995:
		decimals = 1
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
