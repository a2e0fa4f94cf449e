// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"net/http"
	"slices"
	"testing"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal/journaltest"
)

// FuzzEventQuery feeds /v1/events queries and Last-Event-ID headers to
// the query parser, then reads the journal from where the query asks, as
// a stream does: bad input is an error, never a panic; what parses reads
// events in order after the position asked for (or after a Gap), and the
// filter's sets agree with the plain reading of the filter.
func FuzzEventQuery(f *testing.F) {
	for _, seed := range [][2]string{
		{"", ""}, {"since=1003", ""}, {"since=0", ""}, {"since=5000", ""}, {"", "1001"},
		{"pod=web&namespace=shop&type=ContainerDied", ""}, {"since=%zz", ""}, {"pod=&since=1", ""},
		{"type=Gap&type=ContainerStarted&pod=uid-db", "999"}, {"since=18446744073709551615", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, rawQuery, lastEventID string) {
		r, _ := http.NewRequest("GET", "http://pleg/v1/events", nil)
		r.URL.RawQuery = rawQuery
		r.Header.Set("Last-Event-ID", lastEventID)
		q, err := parseEventQuery(r, 8)
		if err != nil {
			return
		}
		j := journaltest.Memory(4, 1000) // holds the 4 latest of 1000..1009
		pods := []string{"web", "db", "dns"}
		types := []pleg.EventType{pleg.ContainerStarted, pleg.ContainerDied, pleg.PodSync}
		for i := range 10 {
			journaltest.Append(j, event(types[i%len(types)], pods[i%len(pods)], []string{"shop", "kube-system"}[i%2], "c"))
		}
		cursor := j.Last()
		if q.hasSince {
			cursor = q.since
		}
		for {
			entries, _ := j.Read(cursor, 3)
			for _, e := range entries {
				ev := NewEntry(e)
				if e.Gap {
					if ev.Type != TypeGap || ev.Seq != ev.To || !q.Match(&ev) {
						t.Fatalf("bad gap %+v after %d", ev, cursor)
					}
					cursor = ev.To
					continue
				}
				if ev.Seq != cursor+1 || ev.Seq > j.Last() {
					t.Fatalf("read %d after %d (last %d)", ev.Seq, cursor, j.Last())
				}
				cursor = ev.Seq
				plain := (len(q.f.Pods) == 0 || slices.Contains(q.f.Pods, ev.PodUID) || slices.Contains(q.f.Pods, ev.PodName)) &&
					(len(q.f.Namespaces) == 0 || slices.Contains(q.f.Namespaces, ev.PodNamespace)) &&
					(len(q.f.Types) == 0 || slices.Contains(q.f.Types, ev.Type))
				if q.Match(&ev) != plain {
					t.Fatalf("filter %+v: the sets say %v of %+v", q.f, !plain, ev)
				}
			}
			if len(entries) == 0 {
				break
			}
		}
		if cursor != j.Last() {
			t.Fatalf("reading stopped at %d, before the last event %d", cursor, j.Last())
		}
	})
}
