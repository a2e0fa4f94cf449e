// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package journaltest gives the tests of the journal's readers (the API
// server and its client) a journal in memory and a way to add events to it
// one at a time. Its functions panic on an error: a journal in memory
// fails only on a bug, and they are called from goroutines where a test's
// Fatal may not be.
package journaltest

import (
	"log/slog"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
)

// Memory returns a journal in memory that holds the size latest events,
// numbered from first.
func Memory(size int, first uint64) *journal.Journal {
	j, err := journal.Open(journal.Options{MaxEvents: size, First: first, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return j
}

// Append commits ev alone to j and returns its number.
func Append(j *journal.Journal, ev pleg.Event) uint64 {
	if err := j.Commit([]pleg.Event{ev}, nil); err != nil {
		panic(err)
	}
	return j.Last()
}
