// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/runtime"
)

// A runtime whose lists hang after the first relist: the recorder takes
// one recording of the incident, served on /v1/recordings and counted.
func TestFlightRecorderRecordsAHungRuntime(t *testing.T) {
	rt := onePod()
	d, _ := runDaemon(t, Config{Runtime: rt, Listen: "127.0.0.1:0", StateDir: t.TempDir(),
		FlightRecorder: FlightRecorder{Enabled: true, MinInterval: time.Hour},
		Generator:      pleg.Options{RelistPeriod: 20 * time.Millisecond, RelistThreshold: 600 * time.Millisecond}})
	base := "http://" + d.Addr()
	eventually(t, "healthy", func() bool { code, _ := get(t, http.DefaultClient, base+"/healthz"); return code == 200 })
	if code, body := get(t, http.DefaultClient, base+"/v1/recordings"); code != 200 || !strings.Contains(body, `"recordings": []`) {
		t.Errorf("/v1/recordings while healthy: %d %s", code, body)
	}
	rt.SetLatency(runtime.OpListPodSandbox, time.Hour)
	var list api.RecordingList
	eventually(t, "a recording", func() bool {
		code, body := get(t, http.DefaultClient, base+"/v1/recordings")
		return code == 200 && json.Unmarshal([]byte(body), &list) == nil && len(list.Recordings) > 0
	})
	rec := list.Recordings[0]
	if rec.Trigger != "slow-relist" && rec.Trigger != "slow-call" {
		t.Errorf("recording %+v: want a slow relist or list call as its trigger", rec)
	}
	code, body := get(t, http.DefaultClient, base+"/v1/recordings/"+rec.Name)
	if code != 200 || !strings.Contains(body, `"op": "list_podsandbox"`) {
		t.Errorf("/v1/recordings/%s: %d, want the hung list among the calls in flight:\n%s", rec.Name, code, body)
	}
	if v := counterValue(t, d, "pleg_recordings_total", rec.Trigger); v != 1 {
		t.Errorf("pleg_recordings_total{trigger=%q} %v, want 1", rec.Trigger, v)
	}
}

func TestFlightRecorderOffWithoutStateDir(t *testing.T) {
	d, _ := runDaemon(t, Config{Runtime: onePod(), Listen: "127.0.0.1:0", FlightRecorder: FlightRecorder{Enabled: true}})
	if d.Recorder != nil {
		t.Error("a recorder without a state directory")
	}
	code, body := get(t, http.DefaultClient, "http://"+d.Addr()+"/v1/recordings")
	if code != 404 || !strings.Contains(body, "the flight recorder is off") {
		t.Errorf("/v1/recordings: %d %s", code, body)
	}
}

// counterValue is the value of the counter name labelled with value.
func counterValue(t *testing.T, d *Daemon, name, label string) float64 {
	t.Helper()
	families, err := d.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// With reporting on, each recording is named in an event on the node.
func TestFlightRecordingNamedInANodeEvent(t *testing.T) {
	rt := onePod()
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	d, _ := runDaemon(t, Config{Runtime: rt, Listen: "127.0.0.1:0", StateDir: t.TempDir(),
		FlightRecorder: FlightRecorder{Enabled: true, MinInterval: time.Hour},
		Kube:           &kubereport.Config{NodeName: "node-1", Client: cs, Spread: time.Millisecond},
		Generator:      pleg.Options{RelistPeriod: 20 * time.Millisecond, RelistThreshold: 600 * time.Millisecond}})
	eventually(t, "healthy", func() bool { code, _ := get(t, http.DefaultClient, "http://"+d.Addr()+"/healthz"); return code == 200 })
	rt.SetLatency(runtime.OpListPodSandbox, time.Hour)
	var ev eventsv1.Event
	eventually(t, "the recording's event", func() bool {
		list, err := cs.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == ReasonFlightRecording {
				ev = e
				return true
			}
		}
		return false
	})
	recs, err := d.Recorder.Store().List()
	if err != nil || len(recs) != 1 {
		t.Fatalf("recordings %+v %v, want one", recs, err)
	}
	// The note names the recording's first finding, then where to read it.
	if !strings.HasPrefix(ev.Note, "[") || !strings.Contains(ev.Note, "kubectl pleg recordings node-1 "+recs[0].Name) {
		t.Errorf("note %q: want the first finding, then kubectl pleg recordings", ev.Note)
	}
	if !strings.Contains(ev.Note, "pleg doctor recordings "+recs[0].Name) || ev.Regarding.Name != "node-1" ||
		ev.ReportingController != "pleg" || ev.ReportingInstance != "node-1" {
		t.Errorf("event %+v: want it on node-1, from pleg, naming %s", ev, recs[0].Name)
	}
}
