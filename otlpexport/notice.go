// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"context"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	collogspb "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/slim/otlp/logs/v1"
)

// RecordingEventName is the EventName of a flight recording's summary.
const RecordingEventName = "pleg.FlightRecording"

// MaxNoticeBody bounds a notice's body, in bytes: a summary, not the
// recording, which stays on the node (GET /v1/recordings/{name}).
const MaxNoticeBody = 4096

// maxNotices bounds the notices waiting to be sent; past it the newest is
// dropped, and said so in the log.
const maxNotices = 16

// Notice is a record that is not one of the journal's events: a flight
// recording's summary and findings, sent beside the events at the onset
// of an incident so that the evidence outlives a node that is drained and
// recycled. It is kept in memory only: a notice the collector has not
// taken when pleg stops is lost, as the node's own copy is not.
type Notice struct {
	EventName string
	Time      time.Time
	// Warn is WARN severity, else ERROR.
	Warn bool
	// Body is cut to MaxNoticeBody bytes.
	Body       string
	Attributes map[string]string
}

// Notify queues n to be sent as soon as the exporter can: between two
// batches, or at once when it waits for events. It returns false when
// the queue is full and n is dropped.
func (e *Exporter) Notify(n Notice) bool {
	select {
	case e.notices <- n:
		return true
	default:
		e.log.Warn("A notice for the OTLP collector was dropped: too many wait", "event", n.EventName)
		return false
	}
}

// record is n as a log record.
func (n Notice) record(node string, now time.Time) *logspb.LogRecord {
	body := n.Body
	if len(body) > MaxNoticeBody {
		body = body[:MaxNoticeBody]
		for !utf8.ValidString(body) {
			body = body[:len(body)-1]
		}
	}
	var attrs []*commonpb.KeyValue
	if node != "" {
		attrs = append(attrs, str("k8s.node.name", node))
	}
	for _, k := range slices.Sorted(maps.Keys(n.Attributes)) {
		attrs = append(attrs, str(k, n.Attributes[k]))
	}
	sev, text := logspb.SeverityNumber_SEVERITY_NUMBER_ERROR, "ERROR"
	if n.Warn {
		sev, text = logspb.SeverityNumber_SEVERITY_NUMBER_WARN, "WARN"
	}
	return &logspb.LogRecord{
		TimeUnixNano:         nanos(n.Time),
		ObservedTimeUnixNano: nanos(now),
		SeverityNumber:       sev,
		SeverityText:         text,
		EventName:            n.EventName,
		Body:                 &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: body}},
		Attributes:           attrs,
	}
}

// sendNotices sends what waits, each until the collector takes it or
// refuses it for good, or ctx ends.
func (e *Exporter) sendNotices(ctx context.Context) {
	for {
		select {
		case n := <-e.notices:
			e.sendNotice(ctx, n)
		default:
			return
		}
	}
}

func (e *Exporter) sendNotice(ctx context.Context, n Notice) {
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: e.opts.Resource.proto(),
		ScopeLogs: []*logspb.ScopeLogs{{Scope: e.scope,
			LogRecords: []*logspb.LogRecord{n.record(e.opts.Resource.NodeName, e.opts.Clock.Now())}}},
	}}}
	for attempt := 0; ; attempt++ {
		e.m.requests.Inc()
		_, _, err := e.opts.Client.Export(ctx, req)
		if err == nil || ctx.Err() != nil {
			return
		}
		retry, after := retryable(err)
		if !retry {
			e.log.Error("The OTLP collector refused a notice for good: it is dropped", "event", n.EventName, "err", err)
			return
		}
		d := max(e.backoff(attempt), after)
		if attempt == 0 || attempt%10 == 0 {
			e.log.Warn("The OTLP collector did not take a notice: retrying", "event", n.EventName, "err", err,
				"attempt", attempt+1, "retryIn", d)
		}
		select {
		case <-ctx.Done():
			return
		case <-e.opts.Clock.After(d):
		}
	}
}
