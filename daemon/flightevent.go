// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/otlpexport"
)

// ReasonFlightRecording is the reason of the node event that names a
// flight recording.
const ReasonFlightRecording = "PLEGFlightRecording"

// recordingEventTimeout bounds the write of a recording's event.
const recordingEventTimeout = 10 * time.Second

// maxReportingInstance is the longest reportingInstance the API server
// admits; a node name may be longer.
const maxReportingInstance = 128

// recordingEvent returns what writes, for each recording, an event on the
// node naming it and its first finding, as pleg's other node events are
// written (reporting controller pleg, the node as the reporting instance:
// what the chart's admission policy admits). The write runs apart with a
// deadline: the API server never holds the recorder. A failed write is
// logged and given up: the log line and the file hold the recording.
func recordingEvent(kc *kubereport.Config, log *slog.Logger) func(rec *flightrec.Recording, findings []doctor.Finding) {
	node := kc.NodeName
	events := kc.Client.EventsV1().Events(metav1.NamespaceDefault)
	return func(rec *flightrec.Recording, findings []doctor.Finding) {
		now := time.Now()
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s.%x", node, now.UnixNano()),
				Namespace: metav1.NamespaceDefault,
			},
			EventTime:           metav1.NewMicroTime(now),
			ReportingController: kubereport.Component,
			ReportingInstance:   node[:min(len(node), maxReportingInstance)],
			Action:              "Record",
			Reason:              ReasonFlightRecording,
			Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node,
				UID: types.UID(node)},
			Type: corev1.EventTypeWarning,
			Note: recordingNote(rec, findings, node),
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), recordingEventTimeout)
			defer cancel()
			if _, err := events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
				log.Warn("The node event naming the flight recording was not written", "recording", rec.Name, "err", err)
			}
		}()
	}
}

// maxNote is the API server's limit on an event's note.
const maxNote = 1024

// recordingNote names the recording's first finding, then where to read
// it, within the API server's limit: the finding first, since it is what
// an operator looking at kubectl describe node acts on.
func recordingNote(rec *flightrec.Recording, findings []doctor.Finding, node string) string {
	var b strings.Builder
	if len(findings) > 0 {
		f := findings[0]
		fmt.Fprintf(&b, "[%s] %s", f.Severity, f.Title)
		if n := len(findings) - 1; n > 0 {
			fmt.Fprintf(&b, " (and %d more findings)", n)
		}
		b.WriteString(". ")
	}
	fmt.Fprintf(&b, "pleg kept a flight recording of the incident (%s: %s): kubectl pleg recordings %s %s, "+
		"or pleg doctor recordings %s on the node", rec.Trigger, rec.Reason, node, rec.Name, rec.Name)
	note := b.String()
	if len(note) > maxNote {
		// The where to read it is worth more than the rest of the reason.
		where := fmt.Sprintf(" ... kubectl pleg recordings %s %s, or pleg doctor recordings %s on the node",
			node, rec.Name, rec.Name)
		note = note[:max(0, maxNote-len(where))] + where
		note = note[:min(len(note), maxNote)]
	}
	return note
}

// recordingNotice is a recording's summary and findings as an OTLP record,
// sent beside the events at the onset, so that they outlive the node.
func recordingNotice(rec *flightrec.Recording, findings []doctor.Finding, node string) otlpexport.Notice {
	var b strings.Builder
	fmt.Fprintf(&b, "pleg flight recording %s on %s: %s: %s\n", rec.Name, node, rec.Trigger, rec.Reason)
	for _, f := range findings {
		fmt.Fprintf(&b, "[%s] %s\n", f.Severity, f.Title)
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	fmt.Fprintf(&b, "The whole recording, while the node lives: kubectl pleg recordings %s %s", node, rec.Name)
	attrs := map[string]string{
		"pleg.recording.name":    rec.Name,
		"pleg.recording.trigger": rec.Trigger,
		"pleg.recording.reason":  rec.Reason,
		"pleg.recording.onset":   rec.Onset.UTC().Format(time.RFC3339Nano),
		"pleg.finding.count":     fmt.Sprint(len(findings)),
	}
	warn := true
	if len(findings) > 0 {
		f := findings[0]
		attrs["pleg.finding.id"], attrs["pleg.finding.severity"], attrs["pleg.finding.title"] =
			f.ID, string(f.Severity), f.Title
		warn = f.Severity != doctor.Critical
	}
	return otlpexport.Notice{EventName: otlpexport.RecordingEventName, Time: rec.Onset, Warn: warn, Body: b.String(),
		Attributes: attrs}
}
