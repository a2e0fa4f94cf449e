// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"fmt"
	"strings"
	"time"

	"github.com/distribution/reference"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/slim/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/slim/otlp/resource/v1"

	"github.com/plegkit/pleg"
)

// LossEventName is the EventName of the record that tells events were
// lost before they could be exported.
const LossEventName = "pleg.EventsLost"

// ScopeName is the instrumentation scope of every record.
const ScopeName = "github.com/plegkit/pleg/otlpexport"

// Reasons a loss record gives.
const (
	// LostRetention: the journal dropped the events (its --event-buffer
	// bounds) before the exporter sent them, e.g. through a long outage.
	LostRetention = "retention"
	// LostJournal: the journal itself lost them (the machine went down
	// before they were synced, or a damaged store was set aside).
	LostJournal = "journal"
	// LostRejected: the collector refused the batch that held them with a
	// permanent error; they are not sent again.
	LostRejected = "rejected"
)

// Resource describes who sends the records.
type Resource struct {
	// NodeName is the node's name, k8s.node.name.
	NodeName string
	// JournalID is the journal's identity, pleg.journal.id: with
	// pleg.seq it names a record for deduplication.
	JournalID string
	// Version is pleg's version, service.version.
	Version string
}

func (r Resource) proto() *resourcepb.Resource {
	return &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
		str("service.name", "pleg"),
		str("service.version", r.Version),
		str("service.instance.id", r.JournalID),
		str("k8s.node.name", r.NodeName),
		str("pleg.journal.id", r.JournalID),
	}}
}

// loss is a range of sequence numbers lost, and why.
type loss struct {
	from, to uint64
	// seq is the journal entry's number that told it: the cursor moves
	// past it once the loss record is sent.
	seq    uint64
	reason string
	detail string
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func integer(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func boolean(k string, v bool) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}}
}

func strs(k string, v ...string) *commonpb.KeyValue {
	vals := make([]*commonpb.AnyValue, len(v))
	for i := range v {
		vals[i] = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v[i]}}
	}
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{
		Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}},
	}}
}

func nanos(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// eventRecord is the log record of the event numbered seq, observed by
// the exporter at now.
func eventRecord(seq uint64, e *pleg.Event, node string, now time.Time) *logspb.LogRecord {
	attrs := make([]*commonpb.KeyValue, 0, 16)
	attrs = append(attrs, integer("pleg.seq", int64(seq)))
	if node != "" {
		attrs = append(attrs, str("k8s.node.name", node))
	}
	attrs = append(attrs,
		str("k8s.namespace.name", e.PodNamespace),
		str("k8s.pod.name", e.PodName),
		str("k8s.pod.uid", e.PodUID),
	)
	if e.ContainerName != "" {
		attrs = append(attrs, str("k8s.container.name", e.ContainerName))
	}
	if e.ContainerID != "" {
		attrs = append(attrs, str("container.id", e.ContainerID))
	}
	if e.Sandbox {
		attrs = append(attrs, boolean("pleg.sandbox", true))
	}
	if e.Attempt != nil {
		attrs = append(attrs, integer("k8s.container.restart_count", int64(*e.Attempt)))
	}
	attrs = append(attrs, imageAttributes(e.Image)...)
	if e.ExitCode != nil {
		attrs = append(attrs, integer("pleg.exit_code", int64(*e.ExitCode)))
	}
	if e.Reason != "" {
		attrs = append(attrs, str("pleg.reason", e.Reason))
	}
	if e.Message != "" {
		attrs = append(attrs, str("pleg.message", e.Message))
	}
	if e.AfterRestart {
		attrs = append(attrs, boolean("pleg.after_restart", true))
	}
	if !e.StartedAt.IsZero() {
		attrs = append(attrs, str("pleg.started_at", e.StartedAt.UTC().Format(time.RFC3339Nano)))
	}
	if !e.FinishedAt.IsZero() {
		attrs = append(attrs, str("pleg.finished_at", e.FinishedAt.UTC().Format(time.RFC3339Nano)))
	}
	sev, sevText := logspb.SeverityNumber_SEVERITY_NUMBER_INFO, "INFO"
	if e.Type == pleg.ContainerDied && e.ExitCode != nil && *e.ExitCode != 0 {
		sev, sevText = logspb.SeverityNumber_SEVERITY_NUMBER_WARN, "WARN"
	}
	// The time it happened: the runtime's finish time of a death, where
	// it tells one, else when pleg saw it.
	when := e.Observed
	if e.Type == pleg.ContainerDied && !e.FinishedAt.IsZero() {
		when = e.FinishedAt
	}
	return &logspb.LogRecord{
		TimeUnixNano:         nanos(when),
		ObservedTimeUnixNano: nanos(now),
		SeverityNumber:       sev,
		SeverityText:         sevText,
		EventName:            string(e.Type),
		Body:                 &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: body(e)}},
		Attributes:           attrs,
	}
}

// body is the event in a line, for a reader of a log store.
func body(e *pleg.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s", e.Type, e.PodNamespace, e.PodName)
	switch {
	case e.ContainerName != "":
		fmt.Fprintf(&b, " container %s", e.ContainerName)
	case e.Sandbox:
		b.WriteString(" sandbox")
	}
	if e.ExitCode != nil {
		fmt.Fprintf(&b, " exit code %d", *e.ExitCode)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, " (%s)", e.Reason)
	}
	return b.String()
}

// imageAttributes are the semantic conventions' image attributes of what
// the runtime reported: a reference gives the name and its tag, a bare
// image ID the ID.
func imageAttributes(image string) []*commonpb.KeyValue {
	if image == "" {
		return nil
	}
	if strings.HasPrefix(image, "sha256:") {
		return []*commonpb.KeyValue{str("container.image.id", image)}
	}
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return []*commonpb.KeyValue{str("container.image.name", image)}
	}
	out := []*commonpb.KeyValue{str("container.image.name", reference.FamiliarName(ref))}
	if t, ok := ref.(reference.Tagged); ok {
		out = append(out, strs("container.image.tags", t.Tag()))
	}
	if d, ok := ref.(reference.Digested); ok {
		out = append(out,
			strs("container.image.repo_digests", reference.FamiliarString(ref)),
			str("container.image.id", d.Digest().String()))
	}
	return out
}

// lossRecord tells that the events numbered l.from to l.to were not and
// will not be exported.
func lossRecord(l loss, node string, now time.Time) *logspb.LogRecord {
	msg := fmt.Sprintf("pleg lost events %d to %d before they were exported: %s", l.from, l.to, l.reason)
	if l.detail != "" {
		msg += ": " + l.detail
	}
	attrs := []*commonpb.KeyValue{
		integer("pleg.lost.first_seq", int64(l.from)),
		integer("pleg.lost.last_seq", int64(l.to)),
		integer("pleg.lost.count", int64(l.to-l.from+1)),
		str("pleg.lost.reason", l.reason),
	}
	if node != "" {
		attrs = append(attrs, str("k8s.node.name", node))
	}
	return &logspb.LogRecord{
		TimeUnixNano:         nanos(now),
		ObservedTimeUnixNano: nanos(now),
		SeverityNumber:       logspb.SeverityNumber_SEVERITY_NUMBER_WARN,
		SeverityText:         "WARN",
		EventName:            LossEventName,
		Body:                 &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: msg}},
		Attributes:           attrs,
	}
}
