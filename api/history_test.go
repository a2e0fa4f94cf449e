// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/journal/journaltest"
	"github.com/plegkit/pleg/podcache"
)

func exit(n int32) *int32 { return &n }

// historyJournal is a journal of two pods of one name in turn (a
// StatefulSet's pod recreated), and another pod, a second apart from t0,
// numbered from 1001.
func historyJournal(size int) *journal.Journal {
	j := journaltest.Memory(size, 1001)
	evs := []pleg.Event{
		{Type: pleg.ContainerStarted, PodUID: "uid-db-old", PodName: "db-0", PodNamespace: "data", ContainerID: "sb-old", Sandbox: true},
		{Type: pleg.ContainerStarted, PodUID: "uid-db-old", PodName: "db-0", PodNamespace: "data", ContainerID: "c-pg-old", ContainerName: "postgres", Image: "postgres:17"},
		{Type: pleg.ContainerStarted, PodUID: "uid-web", PodName: "web", PodNamespace: "shop", ContainerID: "c-nginx-1", ContainerName: "nginx"},
		{Type: pleg.ContainerDied, PodUID: "uid-db-old", PodName: "db-0", PodNamespace: "data", ContainerID: "c-pg-old", ContainerName: "postgres",
			Image: "postgres:17", ExitCode: exit(137), Reason: "OOMKilled", FinishedAt: t0.Add(3500 * time.Millisecond)},
		{Type: pleg.ContainerDied, PodUID: "uid-db-old", PodName: "db-0", PodNamespace: "data", ContainerID: "sb-old", Sandbox: true},
		{Type: pleg.ContainerRemoved, PodUID: "uid-db-old", PodName: "db-0", PodNamespace: "data", ContainerID: "c-pg-old", ContainerName: "postgres"},
		{Type: pleg.ContainerRemoved, PodUID: "uid-db-old", PodName: "db-0", PodNamespace: "data", ContainerID: "sb-old", Sandbox: true},
		{Type: pleg.ContainerStarted, PodUID: "uid-db-new", PodName: "db-0", PodNamespace: "data", ContainerID: "c-pg-new", ContainerName: "postgres"},
		{Type: pleg.PodSync, PodUID: "uid-web", PodName: "web", PodNamespace: "shop"},
	}
	for i, ev := range evs {
		ev.Observed = t0.Add(time.Duration(i+1) * time.Second)
		journaltest.Append(j, ev)
	}
	return j
}

func TestHistory(t *testing.T) {
	f := newFixture(t, Options{Journal: historyJournal(100)})
	for _, tc := range []struct {
		golden string
		query  url.Values
		seqs   []uint64
	}{
		{"history.uid.json", url.Values{"uid": {"uid-db-old"}}, []uint64{1001, 1002, 1004, 1005, 1006, 1007}},
		// By name: both pods of that name.
		{"", url.Values{"namespace": {"data"}, "name": {"db-0"}, "container": {"postgres"}}, []uint64{1002, 1004, 1006, 1008}},
		{"", url.Values{"namespace": {"data"}, "type": {"ContainerDied", "ContainerRemoved"}}, []uint64{1004, 1005, 1006, 1007}},
		// A container by ID; since included, until not.
		{"", url.Values{"container": {"c-pg-old"}, "since": {t0.Add(4 * time.Second).Format(time.RFC3339)}},
			[]uint64{1004, 1006}},
		{"", url.Values{"since": {t0.Add(3 * time.Second).Format(time.RFC3339)}, "until": {t0.Add(5 * time.Second).Format(time.RFC3339)}},
			[]uint64{1003, 1004}},
		{"", url.Values{"uid": {"uid-nobody"}}, []uint64{}},
	} {
		path := "/v1/history?" + tc.query.Encode()
		resp, body := f.get(t, path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if tc.golden != "" {
			golden(t, tc.golden, body)
		}
		var h History
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatal(err)
		}
		seqs := []uint64{}
		for _, ev := range h.Events {
			seqs = append(seqs, ev.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tc.seqs) {
			t.Errorf("GET %s: events %v, want %v", path, seqs, tc.seqs)
		}
		if h.FirstSeq != 1001 || h.LastSeq != 1009 || h.Dropped || h.Omitted != 0 || h.FirstTime == nil || !h.FirstTime.Equal(t0.Add(time.Second)) {
			t.Errorf("GET %s: first %d at %v, last %d, dropped %v, omitted %d; want 1001 at %v, 1009, false, 0",
				path, h.FirstSeq, h.FirstTime, h.LastSeq, h.Dropped, h.Omitted, t0.Add(time.Second))
		}
	}
}

// The limit keeps the latest events; the journal's bounds show.
func TestHistoryLimitAndDropped(t *testing.T) {
	f := newFixture(t, Options{Journal: historyJournal(5)})
	_, body := f.get(t, "/v1/history?namespace=data&limit=2")
	var h History
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 2 || h.Events[0].Seq != 1007 || h.Events[1].Seq != 1008 || h.Omitted != 2 {
		t.Errorf("limit 2: %s; want 1007 and 1008, 2 omitted", body)
	}
	if h.FirstSeq != 1005 || !h.Dropped || h.FirstTime == nil || !h.FirstTime.Equal(t0.Add(5*time.Second)) {
		t.Errorf("first %d at %v, dropped %v; want 1005 at %v, dropped", h.FirstSeq, h.FirstTime, h.Dropped, t0.Add(5*time.Second))
	}
}

// Durations are before now.
func TestHistoryRelativeTimes(t *testing.T) {
	j := journaltest.Memory(10, 1)
	now := time.Now()
	for _, ago := range []time.Duration{3 * time.Hour, time.Hour, time.Minute} {
		journaltest.Append(j, pleg.Event{Type: pleg.PodSync, PodUID: "u", Observed: now.Add(-ago)})
	}
	f := newFixture(t, Options{Journal: j})
	_, body := f.get(t, "/v1/history?since=2h&until=30m")
	var h History
	if err := json.Unmarshal(body, &h); err != nil || len(h.Events) != 1 || h.Events[0].Seq != 2 {
		t.Errorf("since 2h until 30m: %s %v, want event 2 alone", body, err)
	}
}

func TestHistoryBadQueries(t *testing.T) {
	f := newFixture(t, Options{Journal: historyJournal(100)})
	for query, want := range map[string]string{
		"since=yesterday":            `since: "yesterday" is neither an RFC 3339 time`,
		"until=2026-13-01T00:00:00Z": `until: "2026-13-01T00:00:00Z" is neither`,
		"since=-2h":                  "is neither",
		"type=Died":                  `unknown event type "Died"`,
		"limit=0":                    "limit \"0\": want 1 to 10000",
		"limit=10001":                "limit 10001: want 1 to 10000",
		"limit=lots":                 `limit "lots"`,
		"name=db-0":                  "needs a namespace",
		"since=1h&until=2h":          "is not before until",
		"pod=db-0":                   `unknown query parameter "pod"`,
		"uid=a&uid=b":                "uid given 2 times",
		"since=%zz":                  "does not parse",
	} {
		resp, body := f.get(t, "/v1/history?"+query)
		assertError(t, resp, body, 400, want)
	}
}

// fakeLog is a journal of given entries, read as package journal does.
type fakeLog struct {
	floor   uint64
	entries []journal.Entry
}

func (l *fakeLog) Last() uint64 { return l.entries[len(l.entries)-1].Seq }

func (l *fakeLog) Held() (uint64, uint64, bool) { return l.floor, l.Last(), false }

func (l *fakeLog) Read(after uint64, limit int) ([]journal.Entry, <-chan struct{}) {
	var out []journal.Entry
	for _, e := range l.entries {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// A gap is shown where the time around it overlaps the query's, dated by
// the event after it, whatever the pod asked for.
func TestHistoryGaps(t *testing.T) {
	ev := func(seq uint64, s int) journal.Entry {
		return journal.Entry{Seq: seq, Event: pleg.Event{Type: pleg.PodSync, PodUID: "u", Observed: t0.Add(time.Duration(s) * time.Second)}}
	}
	gap := func(from, to uint64) journal.Entry { return journal.Entry{Seq: to, Gap: true, From: from, To: to} }
	log := &fakeLog{floor: 0, entries: []journal.Entry{ev(1, 10), gap(2, 5), ev(6, 20), ev(7, 30), gap(8, 9)}}
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		q    HistoryQuery
		want string
	}{
		{HistoryQuery{UID: "u"}, "1 Gap(2..5)@20 6 7 Gap(8..9)@60"},
		{HistoryQuery{UID: "other"}, "Gap(2..5)@20 Gap(8..9)@60"},
		{HistoryQuery{Types: []string{"PodSync"}}, "1 6 7"},
		{HistoryQuery{Since: t0.Add(21 * time.Second)}, "7 Gap(8..9)@60"},
		{HistoryQuery{Until: t0.Add(15 * time.Second)}, "1 Gap(2..5)@20"},
		{HistoryQuery{Since: t0.Add(12 * time.Second), Until: t0.Add(15 * time.Second)}, "Gap(2..5)@20"},
		{HistoryQuery{UID: "u", Limit: 2}, "7 Gap(8..9)@60"},
	} {
		h := ReadHistory(log, tc.q, now)
		got := ""
		for _, e := range h.Events {
			if got != "" {
				got += " "
			}
			if e.Type == TypeGap {
				got += fmt.Sprintf("Gap(%d..%d)@%d", e.From, e.To, int(e.Time.Sub(t0).Seconds()))
			} else {
				got += fmt.Sprint(e.Seq)
			}
		}
		if got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.q, got, tc.want)
		}
	}
}

// A pod gone from the cache but not from the journal is 410 Gone, with
// its end; a pod the journal never saw is 404, and so is any pod before
// the first relist, when the cache cannot tell.
func TestRemovedPod(t *testing.T) {
	f := newFixture(t, Options{Journal: historyJournal(100)})
	resp, body := f.get(t, "/v1/pods/uid-db-old")
	assertError(t, resp, body, 410, "pod data/db-0 (uid-db-old) was removed at 2026-11-21T10:00:07Z")
	golden(t, "pod.removed.json", body)
	var p RemovedPod
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if !p.RemovedAt.Equal(t0.Add(7*time.Second)) || p.LastEvent.Seq != 1007 || len(p.Containers) != 2 ||
		p.Containers[0].Seq != 1004 || p.Containers[1].Seq != 1005 || *p.Containers[0].ExitCode != 137 {
		t.Errorf("removed pod: %s; want removed at %v by 1007, its containers' last events 1004 and 1005", body, t0.Add(7*time.Second))
	}

	resp, body = f.get(t, "/v1/pods/uid-nobody")
	assertError(t, resp, body, 404, `no pod "uid-nobody" in the cache, nor in the journal`)

	f = newFixture(t, Options{Journal: historyJournal(100), Cache: podcache.New()})
	resp, body = f.get(t, "/v1/pods/uid-db-old")
	assertError(t, resp, body, 404, `no pod "uid-db-old" in the cache`)
}

// An empty journal holds nothing and dropped nothing: nothing happened.
func TestHistoryOfAnEmptyJournal(t *testing.T) {
	f := newFixture(t, Options{Journal: journaltest.Memory(10, 500)})
	_, body := f.get(t, "/v1/history?uid=u")
	var h History
	if err := json.Unmarshal(body, &h); err != nil || h.FirstSeq != 500 || h.LastSeq != 499 || h.Dropped ||
		h.FirstTime != nil || h.Events == nil || len(h.Events) != 0 {
		t.Errorf("empty journal: %s %v; want firstSeq 500, lastSeq 499, nothing dropped, events []", body, err)
	}
}
