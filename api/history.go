// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
)

// Bounds of GET /v1/history.
const (
	// DefaultHistoryLimit is how many events /v1/history returns unless
	// asked for more: the latest that match.
	DefaultHistoryLimit = 1000
	// MaxHistoryLimit is the most it returns, some 5 MB of JSON.
	MaxHistoryLimit = 10000
	// historyBatch is how many entries a history scan reads from the
	// journal at once: the journal's lock is held for one batch.
	historyBatch = 1024
)

// HeldLog is an EventLog that tells which entries it holds: package
// journal's Journal. /v1/history reads the log from its first entry, and
// tells a client how far back the log reaches.
type HeldLog interface {
	EventLog
	// Held tells that the log holds every entry after floor up to last;
	// dropped, that older ones were dropped by its bounds or retention.
	Held() (floor, last uint64, dropped bool)
}

// appendReader is an EventLog that reads into a reader's buffer, as
// package journal's Journal does: a scan of the whole log then allocates
// one batch, not the log.
type appendReader interface {
	ReadAppend(dst []journal.Entry, after uint64, limit int) ([]journal.Entry, <-chan struct{})
}

// History is the answer to GET /v1/history: what the journal holds of a
// pod, or of the node, oldest first.
type History struct {
	// FirstSeq is the number of the oldest entry the journal holds, and
	// FirstTime the time of its oldest event (null if it holds none):
	// events before them are no longer kept.
	FirstSeq  uint64     `json:"firstSeq"`
	FirstTime *time.Time `json:"firstTime"`
	// LastSeq is the number of the last entry when the journal was read:
	// later ones are not in the answer.
	LastSeq uint64 `json:"lastSeq"`
	// Dropped tells that the journal's bounds or retention have dropped
	// events: without it, an empty answer means that nothing matching
	// happened since the journal began.
	Dropped bool `json:"dropped"`
	// Omitted counts the matching events older than the first of Events,
	// left out past the limit.
	Omitted int `json:"omitted"`
	// Events are the latest events that match, at most the limit, oldest
	// first; a Gap among them tells of events lost (a machine that went
	// down before its last writes reached the disk), of any pod.
	Events []Event `json:"events"`
}

// RemovedPod is the answer to GET /v1/pods/{uid} of a pod no longer in
// the cache whose events the journal still holds: 410 Gone, with what the
// journal last said of it. Error makes it an Error too.
type RemovedPod struct {
	Error     string `json:"error"`
	UID       string `json:"uid"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// RemovedAt is the time of the pod's last event: when pleg saw the
	// last of its containers and sandboxes go.
	RemovedAt time.Time `json:"removedAt"`
	// Containers are the last event of each of its containers and
	// sandboxes but their removal, in the order they happened: the
	// ContainerDied of one says how it ended.
	Containers []Event `json:"containers"`
	// LastEvent is the pod's last event.
	LastEvent Event `json:"lastEvent"`
}

// HistoryQuery selects events of /v1/history. Every field that is set
// must match.
type HistoryQuery struct {
	UID string
	// Namespace alone selects its pods; Name needs it.
	Namespace, Name string
	// Container is a container's name or ID.
	Container string
	Types     []string
	// Since and Until bound the events' times: Since included, Until not.
	Since, Until time.Time
	// Limit is how many of the latest matching events are returned;
	// default DefaultHistoryLimit.
	Limit int
}

// Validate checks the query.
func (q HistoryQuery) Validate() error {
	var errs []error
	if q.Name != "" && q.Namespace == "" {
		errs = append(errs, fmt.Errorf("name %q needs a namespace: pod names are unique only within one", q.Name))
	}
	for _, t := range q.Types {
		if !slices.Contains(EventTypes(), t) {
			errs = append(errs, fmt.Errorf("unknown event type %q (want one of %s)", t,
				strings.Join(EventTypes(), ", ")))
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		errs = append(errs, fmt.Errorf("since %s is not before until %s", q.Since.Format(time.RFC3339Nano),
			q.Until.Format(time.RFC3339Nano)))
	}
	if q.Limit < 0 || q.Limit > MaxHistoryLimit {
		errs = append(errs, fmt.Errorf("limit %d: want 1 to %d", q.Limit, MaxHistoryLimit))
	}
	return errors.Join(errs...)
}

// Query is the query as /v1/history parameters, Since and Until in
// RFC 3339.
func (q HistoryQuery) Query() url.Values {
	v := url.Values{}
	for key, val := range map[string]string{"uid": q.UID, "namespace": q.Namespace, "name": q.Name,
		"container": q.Container} {
		if val != "" {
			v.Set(key, val)
		}
	}
	for _, t := range q.Types {
		v.Add("type", t)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ParseTime reads a time of /v1/history and `pleg history`: RFC 3339, or
// a duration before now as Prometheus writes them (90s, 2h, 7d, 1w).
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-21T10:00:00Z) nor a duration "+
			"before now (2h, 7d)", s)
	}
	return now.Add(-time.Duration(d)), nil
}

// parseHistoryQuery reads a /v1/history request's query at now.
func parseHistoryQuery(raw string, now time.Time) (HistoryQuery, error) {
	var q HistoryQuery
	values, err := url.ParseQuery(raw)
	if err != nil {
		return q, fmt.Errorf("query %q does not parse: %w", raw, err)
	}
	var errs []error
	for key, vals := range values {
		if key == "type" {
			q.Types = vals
			continue
		}
		if len(vals) != 1 {
			errs = append(errs, fmt.Errorf("%s given %d times: once at most", key, len(vals)))
			continue
		}
		val := vals[0]
		switch key {
		case "uid":
			q.UID = val
		case "namespace":
			q.Namespace = val
		case "name":
			q.Name = val
		case "container":
			q.Container = val
		case "since", "until":
			t, err := ParseTime(val, now)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
			} else if key == "since" {
				q.Since = t
			} else {
				q.Until = t
			}
		case "limit":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				errs = append(errs, fmt.Errorf("limit %q: want 1 to %d", val, MaxHistoryLimit))
			} else {
				q.Limit = n
			}
		default:
			errs = append(errs, fmt.Errorf("unknown query parameter %q (want uid, namespace, name, container, type, "+
				"since, until or limit)", key))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// history answers GET /v1/history.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q, err := parseHistoryQuery(r.URL.RawQuery, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	h, ok := s.opts.Journal.(HeldLog)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this server's event log keeps no history")
		return
	}
	writeJSON(w, http.StatusOK, ReadHistory(h, q, time.Now()))
}

// ReadHistory reads what log holds that q selects, at now (the end of a
// Gap with no event after it), scanning it batch by batch: memory grows
// with the limit, not with the log.
func ReadHistory(log HeldLog, q HistoryQuery, now time.Time) History {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultHistoryLimit
	}
	m := newHistoryMatcher(q)
	kept := &latest{limit: limit}
	h := History{Events: []Event{}}
	floor, last, dropped := log.Held()
	h.FirstSeq, h.LastSeq, h.Dropped = floor+1, last, dropped
	// Gaps wait for the next event: a Gap is timeless, and shown when
	// the time between the events around it overlaps the query's.
	var gaps []journal.Entry
	var prev time.Time
	flushGaps := func(next time.Time) {
		for _, g := range gaps {
			if m.gaps && (q.Until.IsZero() || prev.Before(q.Until)) && (q.Since.IsZero() || !next.Before(q.Since)) {
				kept.add(Event{Seq: g.Seq, Time: next.UTC(), Type: TypeGap, From: g.From, To: g.To})
			}
		}
		gaps = gaps[:0]
	}
	scan(log, floor, last, func(e *journal.Entry) {
		if e.Gap {
			gaps = append(gaps, *e)
			return
		}
		if h.FirstTime == nil {
			h.FirstTime = utc(e.Event.Observed)
		}
		flushGaps(e.Event.Observed)
		prev = e.Event.Observed
		if m.match(&e.Event) {
			kept.add(NewEvent(e.Seq, e.Event))
		}
	})
	flushGaps(now)
	h.Events, h.Omitted = kept.events(), kept.omitted
	return h
}

// scan calls fn with every entry of log after floor up to last, oldest
// first. A gap where the log dropped entries while it was read is one
// entry too.
func scan(log EventLog, floor, last uint64, fn func(*journal.Entry)) {
	read := func(_ []journal.Entry, after uint64, limit int) ([]journal.Entry, <-chan struct{}) {
		return log.Read(after, limit)
	}
	if a, ok := log.(appendReader); ok {
		read = a.ReadAppend
	}
	var entries []journal.Entry
	for cursor := floor; cursor < last; {
		entries, _ = read(entries, cursor, historyBatch)
		if len(entries) == 0 {
			return
		}
		for i := range entries {
			if entries[i].Seq > last {
				return
			}
			fn(&entries[i])
		}
		next := entries[len(entries)-1].Seq
		if next <= cursor {
			// A gap whose numbers went back (a journal reset): what
			// follows is another journal's.
			return
		}
		cursor = next
	}
}

// historyMatcher is a HistoryQuery made ready to match journal entries.
type historyMatcher struct {
	q     HistoryQuery
	types set
	gaps  bool // whether Gaps are asked for
}

func newHistoryMatcher(q HistoryQuery) *historyMatcher {
	types := newSet(q.Types)
	return &historyMatcher{q: q, types: types, gaps: types.has(TypeGap)}
}

func (m *historyMatcher) match(ev *pleg.Event) bool {
	q := &m.q
	return (q.UID == "" || ev.PodUID == q.UID) &&
		(q.Namespace == "" || ev.PodNamespace == q.Namespace) &&
		(q.Name == "" || ev.PodName == q.Name) &&
		(q.Container == "" || ev.ContainerName == q.Container || ev.ContainerID == q.Container) &&
		m.types.has(string(ev.Type)) &&
		(q.Since.IsZero() || !ev.Observed.Before(q.Since)) &&
		(q.Until.IsZero() || ev.Observed.Before(q.Until))
}

// latest keeps the last limit events added, in a ring.
type latest struct {
	limit   int
	buf     []Event
	next    int // where the next event goes once buf is full
	omitted int
}

func (l *latest) add(ev Event) {
	if len(l.buf) < l.limit {
		l.buf = append(l.buf, ev)
		return
	}
	l.buf[l.next] = ev
	l.next = (l.next + 1) % l.limit
	l.omitted++
}

// events returns the events kept, oldest first.
func (l *latest) events() []Event {
	if l.buf == nil {
		return []Event{} // [] in JSON, not null
	}
	if l.next == 0 {
		return l.buf
	}
	return append(l.buf[l.next:], l.buf[:l.next]...)
}

// removedPod answers GET /v1/pods/{uid} of a pod not in the cache: 410
// with what the journal last said of it, or the 404 of a pod it never
// saw. Before the first relist, a pod missing from the cache may still
// be there: 404 as ever.
func (s *Server) removedPod(w http.ResponseWriter, uid string) {
	h, ok := s.opts.Journal.(HeldLog)
	if !ok || s.opts.Cache.GlobalTime().IsZero() {
		writeError(w, http.StatusNotFound, "no pod %q in the cache", uid)
		return
	}
	p, ok := ReadRemovedPod(h, uid)
	if !ok {
		writeError(w, http.StatusNotFound, "no pod %q in the cache, nor in the journal's events", uid)
		return
	}
	writeJSON(w, http.StatusGone, p)
}

// ReadRemovedPod reads what log holds of pod uid, as a removed pod; false
// if it holds no event of it.
func ReadRemovedPod(log HeldLog, uid string) (RemovedPod, bool) {
	p := RemovedPod{UID: uid, Containers: []Event{}}
	last := map[string]int{} // container ID: index in p.Containers
	found := false
	floor, end, _ := log.Held()
	scan(log, floor, end, func(e *journal.Entry) {
		if e.Gap || e.Event.PodUID != uid {
			return
		}
		found = true
		ev := NewEvent(e.Seq, e.Event)
		p.LastEvent, p.Name, p.Namespace = ev, ev.PodName, ev.PodNamespace
		if ev.ContainerID == "" || ev.Type == string(pleg.ContainerRemoved) {
			return
		}
		if i, ok := last[ev.ContainerID]; ok {
			p.Containers = slices.Delete(p.Containers, i, i+1)
			for id, j := range last {
				if j > i {
					last[id] = j - 1
				}
			}
		}
		last[ev.ContainerID] = len(p.Containers)
		p.Containers = append(p.Containers, ev)
	})
	if !found {
		return p, false
	}
	p.RemovedAt = p.LastEvent.Time
	p.Error = fmt.Sprintf("pod %s/%s (%s) was removed at %s", p.Namespace, p.Name, uid,
		p.RemovedAt.Format(time.RFC3339Nano))
	return p, true
}
