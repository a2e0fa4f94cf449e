// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package termsafe escapes what a terminal would act on rather than show,
// in text and in encoded JSON, for the commands that print what a runtime
// or a daemon says: names, IDs and messages that any client of the
// runtime may have chosen.
package termsafe

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// String returns s with what a terminal would act on instead of show
// escaped, as Go quotes it: control characters (an escape sequence can
// clear the screen, rewrite earlier lines, set the window title or, on
// some terminals, answer back as typed input), Unicode format characters
// (a bidirectional override reorders what follows it), anything else not
// printable, and bytes that are not UTF-8. Names, IDs and messages come
// from the runtime, whose clients may name a container anything.
func String(s string) string {
	if !strings.ContainsFunc(s, needsEscape) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r):
			q := strconv.QuoteRune(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// needsEscape reports whether a terminal could act on r rather than show
// it. A tab would break the table's columns.
func needsEscape(r rune) bool { return !unicode.IsPrint(r) || r == '\t' }

// JSON escapes in encoded JSON what encoding/json leaves raw
// and a terminal may act on: DEL, the C1 controls (U+009B is an escape
// sequence's introducer on some terminals) and format characters such as
// the bidirectional overrides. The JSON means the same.
func JSON(data []byte) []byte {
	if !bytes.ContainsFunc(data, func(r rune) bool { return r != '\n' && r != ' ' && !unicode.IsPrint(r) }) {
		return data
	}
	out := make([]byte, 0, len(data)+32)
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		switch {
		case r == '\n' || r == ' ' || unicode.IsPrint(r) || (r == utf8.RuneError && size == 1):
			// encoding/json writes no invalid UTF-8; pass what it wrote.
			out = append(out, data[:size]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		data = data[size:]
	}
	return out
}
