// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/kubereport"
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
// node naming it, as pleg's other node events are written (reporting
// controller pleg, the node as the reporting instance: what the chart's
// admission policy admits). The write runs apart with a deadline: the API
// server never holds the recorder. A failed write is logged and given up:
// the log line and the file hold the recording.
func recordingEvent(kc *kubereport.Config, log *slog.Logger) func(rec *flightrec.Recording, path string) {
	node := kc.NodeName
	events := kc.Client.EventsV1().Events(metav1.NamespaceDefault)
	return func(rec *flightrec.Recording, path string) {
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
			Note: fmt.Sprintf("pleg kept a flight recording of the incident (%s: %s): "+
				"kubectl exec into this node's pleg pod and run pleg doctor recordings %s", rec.Trigger, rec.Reason,
				rec.Name),
		}
		if len(ev.Note) > 1024 { // the API server's limit
			ev.Note = ev.Note[:1024]
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
