// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package otlpexport ships the journal's events to an OpenTelemetry
// Collector as OTLP log records, at least once and in order.
//
// The journal is the queue: the exporter reads it after a cursor, sends a
// bounded batch, and moves the cursor (kept in the state directory) only
// once the collector has accepted the batch. A collector that is down or
// refuses with a retryable error is retried, with capped, jittered
// exponential backoff, for as long as it takes; the journal keeps what
// waits, within its bounds. Events the journal dropped before they were
// sent, and batches the collector refused for good, are told by a loss
// record (EventName pleg.EventsLost) naming the sequence numbers, and
// counted. A kill between the collector's acceptance and the cursor's
// save sends that batch again: downstream, (pleg.journal.id, pleg.seq)
// names each record once.
//
// Requests are built from the OTLP protobuf definitions and sent over
// net/http or gRPC by the package itself, not through the OpenTelemetry
// SDK, whose exporters queue and retry out of sight: the cursor must move
// on the collector's answer to the very request that carried the batch.
package otlpexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	collogspb "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/slim/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/journal"
)

// Defaults of Options.
const (
	DefaultMaxBatch       = 512
	DefaultMaxBatchBytes  = 1 << 20
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = 30 * time.Second
	DefaultBehindEvents   = 1000
	DefaultBehindAge      = time.Minute
)

// Journal is what the exporter reads: *journal.Journal.
type Journal interface {
	Read(after uint64, limit int) ([]journal.Entry, <-chan struct{})
	Last() uint64
	Floor() uint64
	ID() string
}

// Options configure an Exporter. Client and Cursor are required.
type Options struct {
	Client   Client
	Cursor   Cursor
	Resource Resource
	// MaxBatch and MaxBatchBytes bound a request, in records and in
	// encoded bytes (a single record larger than that is sent alone).
	MaxBatch      int
	MaxBatchBytes int
	// InitialBackoff and MaxBackoff shape the wait between attempts:
	// doubled at each failure up to MaxBackoff, then jittered to between
	// half and all of it. A collector's Retry-After or RetryInfo is
	// waited for if longer.
	InitialBackoff, MaxBackoff time.Duration
	// BehindEvents and BehindAge say when the exporter is behind: more
	// events than that not exported, or the oldest older than that. It
	// says so in the log once, and once again when it has caught up.
	BehindEvents int
	BehindAge    time.Duration
	Clock        clock.Clock
	// Jitter returns a number in [0, 1); default math/rand/v2.
	Jitter     func() float64
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.InitialBackoff == 0 {
		o.InitialBackoff = DefaultInitialBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.BehindEvents == 0 {
		o.BehindEvents = DefaultBehindEvents
	}
	if o.BehindAge == 0 {
		o.BehindAge = DefaultBehindAge
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("no client"))
	}
	if o.Cursor == nil {
		errs = append(errs, errors.New("no cursor"))
	}
	if o.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("batch size %d: must be at least 1", o.MaxBatch))
	}
	if o.MaxBatchBytes < 1 {
		errs = append(errs, fmt.Errorf("batch bytes %d: must be at least 1", o.MaxBatchBytes))
	}
	if o.InitialBackoff < 0 || o.MaxBackoff < o.InitialBackoff {
		errs = append(errs, fmt.Errorf("backoff %v to %v: want 0 < initial <= max", o.InitialBackoff, o.MaxBackoff))
	}
	return o, errors.Join(errs...)
}

// Exporter ships a journal's events. Create it with New, then Run it.
type Exporter struct {
	opts    Options
	j       Journal
	id      string
	log     *slog.Logger
	m       *metrics
	scope   *commonpb.InstrumentationScope
	cursor  uint64
	pending []loss // losses not sent yet, in order
	behind  bool
	notices chan Notice
}

// New returns an exporter of j's events.
func New(j Journal, opts Options) (*Exporter, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("otlp export: %w", err)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	opts.Resource.JournalID = j.ID()
	e := &Exporter{
		opts: opts, j: j, id: j.ID(), log: opts.Logger, m: m, notices: make(chan Notice, maxNotices),
		scope: &commonpb.InstrumentationScope{Name: ScopeName, Version: opts.Resource.Version},
	}
	return e, nil
}

// Close closes the client's connections, once Run has returned.
func (e *Exporter) Close() error { return e.opts.Client.Close() }

// batch is a request and what it carries.
type batch struct {
	req    *collogspb.ExportLogsServiceRequest
	events int    // event records
	first  uint64 // the first sequence number it covers, losses included
	last   uint64 // the cursor once it is accepted
	losses []loss
}

// Run exports until ctx ends. It returns nil then; the cursor holds what
// the collector accepted.
func (e *Exporter) Run(ctx context.Context) error {
	cur, err := e.opts.Cursor.Load(e.id)
	if err != nil {
		e.log.Error("The OTLP export cursor could not be read: exporting all the journal holds, which the "+
			"collector may have had already", "err", err)
	}
	e.cursor = cur
	e.m.cursor.Set(float64(cur))
	e.log.Info("Exporting the journal's events over OTLP", "journal", e.id, "after", cur)
	for ctx.Err() == nil {
		e.sendNotices(ctx)
		entries, grew := e.j.Read(e.cursor, e.opts.MaxBatch)
		e.readLosses(&entries)
		if len(entries) == 0 && len(e.pending) == 0 {
			e.updateLag(nil)
			select {
			case <-ctx.Done():
			case <-grew:
			case n := <-e.notices:
				e.sendNotice(ctx, n)
			}
			continue
		}
		e.updateLag(entries)
		b := e.build(entries)
		e.send(ctx, b, entries)
	}
	return nil
}

// readLosses turns the gaps among entries into pending losses, leaving
// the events.
func (e *Exporter) readLosses(entries *[]journal.Entry) {
	in := *entries
	if len(in) == 0 || !hasGap(in) {
		return
	}
	// A gap first, for a cursor the journal no longer holds, is the
	// retention's; a gap among the entries is the journal's own.
	floor := e.j.Floor()
	out := in[:0:0]
	for i, en := range in {
		if !en.Gap {
			out = append(out, en)
			continue
		}
		if len(out) > 0 {
			// Losses go before the events of a batch: this one waits for
			// the next, which starts with it.
			break
		}
		if en.From > en.To {
			e.log.Warn("The OTLP export cursor is ahead of the journal, which was reset: exporting from its start",
				"cursor", e.cursor, "journalFirst", en.To+1)
			e.cursor = en.Seq
			continue
		}
		reason := LostJournal
		if i == 0 && (e.cursor < floor || e.cursor > e.j.Last()) {
			reason = LostRetention
		}
		l := loss{from: en.From, to: en.To, seq: en.Seq, reason: reason}
		e.pending = append(e.pending, l)
		e.m.lost.WithLabelValues(reason).Add(float64(l.to - l.from + 1))
		e.log.Warn("Events were lost before they could be exported: a loss record tells the collector",
			"firstSeq", l.from, "lastSeq", l.to, "reason", reason)
	}
	*entries = out
}

func hasGap(in []journal.Entry) bool {
	for i := range in {
		if in[i].Gap {
			return true
		}
	}
	return false
}

// build makes the request of the pending losses and as many entries as
// the bounds allow.
func (e *Exporter) build(entries []journal.Entry) *batch {
	now := e.opts.Clock.Now()
	node := e.opts.Resource.NodeName
	b := &batch{last: e.cursor}
	if len(entries) > 0 {
		b.first = entries[0].Seq
	}
	var recs []*logspb.LogRecord
	size := 0
	for _, l := range e.pending {
		r := lossRecord(l, node, now)
		recs = append(recs, r)
		size += proto.Size(r)
		if b.first == 0 || l.from < b.first {
			b.first = l.from
		}
		b.last = max(b.last, l.seq)
		b.losses = append(b.losses, l)
	}
	for i := range entries {
		en := &entries[i]
		r := eventRecord(en.Seq, &en.Event, node, now)
		s := proto.Size(r)
		if len(recs) > 0 && (len(recs) >= e.opts.MaxBatch || size+s > e.opts.MaxBatchBytes) {
			break
		}
		recs, size = append(recs, r), size+s
		b.events++
		b.last = en.Seq
	}
	b.req = &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  e.opts.Resource.proto(),
		ScopeLogs: []*logspb.ScopeLogs{{Scope: e.scope, LogRecords: recs}},
	}}}
	return b
}

// send sends b until the collector accepts it or refuses it for good, or
// ctx ends, and moves the cursor past it unless ctx ended.
func (e *Exporter) send(ctx context.Context, b *batch, entries []journal.Entry) {
	n := len(b.req.ResourceLogs[0].ScopeLogs[0].LogRecords)
	for attempt := 0; ; attempt++ {
		e.m.requests.Inc()
		rejected, msg, err := e.opts.Client.Export(ctx, b.req)
		if err == nil {
			e.accepted(b, rejected, msg)
			return
		}
		if ctx.Err() != nil {
			return
		}
		retry, after := retryable(err)
		if !retry {
			e.refused(b, err)
			return
		}
		e.m.failed.WithLabelValues(failRetryable).Add(float64(n))
		d := e.backoff(attempt)
		if after > d {
			d = after
		}
		if attempt == 0 || attempt%10 == 0 {
			e.log.Warn("The OTLP collector did not take a batch: retrying, the journal keeps the events meanwhile",
				"err", err, "records", n, "attempt", attempt+1, "retryIn", d)
		}
		select {
		case <-ctx.Done():
			return
		case <-e.opts.Clock.After(d):
		}
		e.updateLag(entries)
	}
}

// backoff is the wait after the attempt-th failure (from 0).
func (e *Exporter) backoff(attempt int) time.Duration {
	d := e.opts.InitialBackoff
	for i := 0; i < attempt && d < e.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, e.opts.MaxBackoff)
	return d/2 + time.Duration(e.opts.Jitter()*float64(d/2))
}

// accepted moves the cursor past an accepted batch.
func (e *Exporter) accepted(b *batch, rejected int64, msg string) {
	e.m.exported.Add(float64(b.events))
	e.m.bytes.Add(float64(proto.Size(b.req)))
	if rejected > 0 || msg != "" {
		e.m.failed.WithLabelValues(failRejected).Add(float64(rejected))
		e.log.Warn("The OTLP collector accepted a batch in part: the records it rejected are not sent again",
			"rejected", rejected, "records", len(b.req.ResourceLogs[0].ScopeLogs[0].LogRecords), "message", msg,
			"firstSeq", b.first, "lastSeq", b.last)
	}
	e.pending = e.pending[len(b.losses):]
	e.advance(b.last)
}

// refused drops a batch the collector refused for good: a loss record
// in the next batch names its numbers.
func (e *Exporter) refused(b *batch, err error) {
	n := len(b.req.ResourceLogs[0].ScopeLogs[0].LogRecords)
	e.m.failed.WithLabelValues(failPermanent).Add(float64(n))
	e.m.lost.WithLabelValues(LostRejected).Add(float64(b.events))
	e.log.Error("The OTLP collector refused a batch for good: it is dropped, and a loss record names its events; "+
		"fix the collector's configuration", "err", err, "records", n, "firstSeq", b.first, "lastSeq", b.last)
	e.pending = e.pending[len(b.losses):]
	if b.events > 0 {
		// The losses it carried are folded into the one that replaces it.
		e.pending = append([]loss{{from: b.first, to: b.last, seq: b.last, reason: LostRejected, detail: err.Error()}},
			e.pending...)
	}
	// A batch of loss records only is not told again: the log and the
	// counters are all that is left to say it, and a collector that
	// refuses everything gets each batch once.
	e.advance(b.last)
}

func (e *Exporter) advance(to uint64) {
	if to == e.cursor {
		return
	}
	e.cursor = to
	e.m.cursor.Set(float64(to))
	if err := e.opts.Cursor.Save(e.id, to); err != nil {
		e.log.Error("The OTLP export cursor could not be saved: a restart sends again what was sent since",
			"err", err, "cursor", to)
	}
}

// updateLag sets the lag gauges, the oldest entry not exported being the
// first of entries, and says when the exporter falls behind or catches
// up.
func (e *Exporter) updateLag(entries []journal.Entry) {
	// Past the cursor, or past what the journal dropped when the cursor
	// is behind it (or none was saved yet).
	var events uint64
	if last, from := e.j.Last(), max(e.cursor, e.j.Floor()); last > from {
		events = last - from
	}
	var age time.Duration
	if events > 0 && len(entries) > 0 {
		age = max(e.opts.Clock.Since(entries[0].Event.Observed), 0)
	}
	e.m.lagEvents.Set(float64(events))
	e.m.lagSeconds.Set(age.Seconds())
	switch {
	case !e.behind && (events > uint64(e.opts.BehindEvents) || age > e.opts.BehindAge):
		e.behind = true
		e.m.behind.Set(1)
		e.log.Warn("The OTLP export falls behind the journal; events wait in it, within its bounds",
			"lagEvents", events, "lagAge", age.Round(time.Second), "cursor", e.cursor)
	case e.behind && events == 0:
		e.behind = false
		e.m.behind.Set(0)
		e.log.Info("The OTLP export has caught up with the journal", "cursor", e.cursor)
	}
}
