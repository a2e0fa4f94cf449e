// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/slim/otlp/logs/v1"

	"github.com/plegkit/pleg"
)

func attrs(kvs []*commonpb.KeyValue) string {
	var out []string
	for _, kv := range kvs {
		var v string
		switch x := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			v = fmt.Sprintf("%q", x.StringValue)
		case *commonpb.AnyValue_IntValue:
			v = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			v = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_ArrayValue:
			v = fmt.Sprintf("[%s]", x.ArrayValue.Values[0].GetStringValue())
		}
		out = append(out, kv.Key+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// Each event is a record with the semantic conventions' attributes and
// pleg's own; the time is when it happened.
func TestEventRecord(t *testing.T) {
	observed := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	finished := observed.Add(-2 * time.Second)
	now := observed.Add(time.Minute)
	attempt, exit := uint32(3), int32(137)
	for _, tc := range []struct {
		name     string
		ev       pleg.Event
		when     time.Time
		severity logspb.SeverityNumber
		want     string
	}{
		{
			name: "an OOM kill",
			ev: pleg.Event{
				Type: pleg.ContainerDied, PodUID: "u1", PodName: "web", PodNamespace: "shop", ContainerID: "abc",
				ContainerName: "nginx", Observed: observed, FinishedAt: finished, Image: "nginx:1.27",
				Attempt: &attempt, ExitCode: &exit, Reason: "OOMKilled", Message: "out of memory", AfterRestart: true,
			},
			when: finished, severity: logspb.SeverityNumber_SEVERITY_NUMBER_WARN,
			want: `container.id="abc" container.image.name="nginx" container.image.tags=[1.27] k8s.container.name="nginx" ` +
				`k8s.container.restart_count=3 k8s.namespace.name="shop" k8s.node.name="node-1" k8s.pod.name="web" ` +
				`k8s.pod.uid="u1" pleg.after_restart=true pleg.exit_code=137 pleg.finished_at="2026-11-26T09:59:58Z" ` +
				`pleg.message="out of memory" pleg.reason="OOMKilled" pleg.seq=42`,
		},
		{
			name: "a sandbox started",
			ev: pleg.Event{
				Type: pleg.ContainerStarted, PodUID: "u1", PodName: "web", PodNamespace: "shop", ContainerID: "sb",
				Sandbox: true, Observed: observed,
			},
			when: observed, severity: logspb.SeverityNumber_SEVERITY_NUMBER_INFO,
			want: `container.id="sb" k8s.namespace.name="shop" k8s.node.name="node-1" k8s.pod.name="web" ` +
				`k8s.pod.uid="u1" pleg.sandbox=true pleg.seq=42`,
		},
		{
			name: "an image by digest",
			ev: pleg.Event{
				Type: pleg.ContainerStarted, PodUID: "u1", PodName: "web", PodNamespace: "shop", ContainerID: "abc",
				ContainerName: "app", Observed: observed,
				Image: "registry.example/app@sha256:0123456789012345678901234567890123456789012345678901234567890123",
			},
			when: observed, severity: logspb.SeverityNumber_SEVERITY_NUMBER_INFO,
			want: `container.id="abc" container.image.id="sha256:0123456789012345678901234567890123456789012345678901234567890123" ` +
				`container.image.name="registry.example/app" ` +
				`container.image.repo_digests=[registry.example/app@sha256:0123456789012345678901234567890123456789012345678901234567890123] ` +
				`k8s.container.name="app" k8s.namespace.name="shop" k8s.node.name="node-1" k8s.pod.name="web" k8s.pod.uid="u1" pleg.seq=42`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := eventRecord(42, &tc.ev, "node-1", now)
			if got := attrs(r.Attributes); got != tc.want {
				t.Errorf("attributes:\n%s\nwant:\n%s", got, tc.want)
			}
			if r.EventName != string(tc.ev.Type) || r.TimeUnixNano != uint64(tc.when.UnixNano()) ||
				r.ObservedTimeUnixNano != uint64(now.UnixNano()) || r.SeverityNumber != tc.severity {
				t.Errorf("record %v", r)
			}
		})
	}
	res := attrs(Resource{NodeName: "node-1", JournalID: "j1", Version: "v1"}.proto().Attributes)
	if want := `k8s.node.name="node-1" pleg.journal.id="j1" service.instance.id="j1" service.name="pleg" service.version="v1"`; res != want {
		t.Errorf("resource %s, want %s", res, want)
	}
}
