// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"log/slog"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
)

// memJournal is a journal in memory holding the size latest events,
// numbered from first.
func memJournal(size int, first uint64) *journal.Journal {
	j, err := journal.Open(journal.Options{MaxEvents: size, First: first, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return j
}

// appendEvent commits ev alone to j and returns its number.
func appendEvent(j *journal.Journal, ev pleg.Event) uint64 {
	if err := j.Commit([]pleg.Event{ev}, nil); err != nil {
		panic(err)
	}
	return j.Last()
}
