// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime"
)

// A runtime that hangs after the first relist makes the PLEG unhealthy
// (/healthz 500, the kubelet's words) while pleg stays ready: it serves,
// and what it serves is that news. A sick runtime on one node must not
// hold a rollout of pleg on every node.
func TestReadyzStaysWhenTheRuntimeHangsAfterTheFirstRelist(t *testing.T) {
	rt := onePod()
	d, _ := runDaemon(t, Config{Runtime: rt, Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0",
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond, RelistThreshold: 300 * time.Millisecond}})
	for _, base := range []string{"http://" + d.Addr(), "http://" + d.MetricsAddr()} {
		eventually(t, "ready and healthy", func() bool {
			r, _ := get(t, http.DefaultClient, base+"/readyz")
			h, _ := get(t, http.DefaultClient, base+"/healthz")
			return r == 200 && h == 200
		})
	}
	if v := gaugeValue(t, d, "pleg_healthy"); v != 1 {
		t.Errorf("pleg_healthy %v while healthy, want 1", v)
	}
	rt.SetLatency(runtime.OpListPodSandbox, time.Hour) // every list now hangs until its deadline
	for _, base := range []string{"http://" + d.Addr(), "http://" + d.MetricsAddr()} {
		eventually(t, "unhealthy", func() bool {
			code, body := get(t, http.DefaultClient, base+"/healthz")
			return code == 500 && strings.HasPrefix(body, "PLEG is not healthy: pleg was last seen active ")
		})
		if code, body := get(t, http.DefaultClient, base+"/readyz"); code != 200 || body != "ok\n" {
			t.Errorf("%s/readyz with a hung runtime: %d %q, want 200 ok", base, code, body)
		}
		if code, _ := get(t, http.DefaultClient, base+"/livez"); code != 200 {
			t.Errorf("%s/livez with a hung runtime: %d", base, code)
		}
	}
	if v := gaugeValue(t, d, "pleg_healthy"); v != 0 {
		t.Errorf("pleg_healthy %v while /healthz fails, want 0", v)
	}
	_, body := get(t, http.DefaultClient, "http://"+d.Addr()+"/readyz?verbose")
	if !strings.Contains(body, "[+]first-relist ok\n[+]server ok\n") || !strings.Contains(body, "\ncache: complete as of ") ||
		!strings.HasSuffix(body, "readyz check passed\n") {
		t.Errorf("/readyz?verbose with a hung runtime:\n%s", body)
	}
}

// A runtime down from the start: pleg is unready until its first list
// has failed, then ready and unhealthy, with the cache's state in the
// verbose pages; once the runtime answers, healthy.
func TestReadyzWithTheRuntimeDownFromTheStart(t *testing.T) {
	rt := onePod()
	down := status.Error(codes.Unavailable, "connection refused")
	rt.SetOpError(runtime.OpListPodSandbox, down)
	rt.SetLatency(runtime.OpListPodSandbox, time.Hour) // the first list hangs: nothing has ended yet
	d, _ := runDaemon(t, Config{Runtime: rt, Listen: "127.0.0.1:0",
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})
	base := "http://" + d.Addr()
	eventually(t, "the first list to be made", func() bool { return rt.Calls(runtime.OpListPodSandbox) > 0 })
	code, body := get(t, http.DefaultClient, base+"/readyz")
	if code != 500 || !strings.HasPrefix(body, "first-relist is not ready: the first relist has not ended yet") {
		t.Errorf("/readyz while the first list hangs: %d %q", code, body)
	}
	if _, body := get(t, http.DefaultClient, base+"/readyz?verbose"); !strings.Contains(body, "\ncache: not written yet, the first relist is under way\n") {
		t.Errorf("/readyz?verbose while the first list hangs:\n%s", body)
	}
	// The hung list ends as a runtime that refuses would: at once.
	d.Gen.Stop()
	rt.SetLatency(runtime.OpListPodSandbox, 0)
	d.Gen.Start()
	eventually(t, "ready", func() bool { code, _ := get(t, http.DefaultClient, base+"/readyz"); return code == 200 })
	if code, body := get(t, http.DefaultClient, base+"/healthz"); code != 500 || body != "PLEG is not healthy: pleg has yet to be successful\n" {
		t.Errorf("/healthz with the runtime down: %d %q", code, body)
	}
	_, body = get(t, http.DefaultClient, base+"/readyz?verbose")
	if !strings.Contains(body, "\ncache: EMPTY, no relist has succeeded: the runtime's lists fail since ") ||
		!strings.Contains(body, "connection refused") {
		t.Errorf("/readyz?verbose with the runtime down:\n%s", body)
	}
	// The runtime comes up; its first good relist hangs on a pod's
	// inspection, and pleg stays ready meanwhile.
	rt.SetHang("c1", true)
	rt.SetOpError(runtime.OpListPodSandbox, nil)
	eventually(t, "the pod inspected", func() bool { return rt.ItemCalls("c1") > 0 })
	if code, body := get(t, http.DefaultClient, base+"/readyz"); code != 200 {
		t.Errorf("/readyz while the first good relist is written: %d %q; once ready, stay ready", code, body)
	}
	d.Gen.Stop() // ends the hung inspection
	rt.SetHang("c1", false)
	d.Gen.Start()
	// Healthy comes with the lists, as the kubelet's relist time does;
	// the cache is complete once the relist has written every pod, after.
	eventually(t, "healthy, and the cache complete, once the runtime answers", func() bool {
		code, body := get(t, http.DefaultClient, base+"/healthz?verbose")
		return code == 200 && strings.Contains(body, "\ncache: complete as of ")
	})
}

// gaugeValue is the value of d's gauge name, which has no labels.
func gaugeValue(t *testing.T, d *Daemon, name string) float64 {
	t.Helper()
	families, err := d.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func TestStreamDown(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	since := now.Add(-5 * time.Minute)
	for _, tc := range []struct {
		name string
		st   pleg.Status
		want time.Duration
	}{
		{"generic", pleg.Status{Mode: pleg.ModeGeneric}, 0},
		{"auto, not tried yet", pleg.Status{Mode: pleg.ModeAuto}, 0},
		{"auto, connected", pleg.Status{Mode: pleg.ModeAuto, StreamConnected: true, StreamSince: since}, 0},
		{"auto, the runtime has none", pleg.Status{Mode: pleg.ModeAuto, NoStream: true, StreamSince: since}, 0},
		{"auto, down", pleg.Status{Mode: pleg.ModeAuto, StreamSince: since}, 5 * time.Minute},
		{"evented, down", pleg.Status{Mode: pleg.ModeEvented, StreamSince: since}, 5 * time.Minute},
	} {
		if got := streamDown(tc.st, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// pleg_evented_stream_down_seconds grows while a stream the mode asks for
// is down, and is 0 again once it is back.
func TestStreamDownSeconds(t *testing.T) {
	rt := onePod()
	rt.EnableEvents(true)
	d, _ := runDaemon(t, Config{Runtime: rt, Listen: "127.0.0.1:0",
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})
	eventually(t, "the stream connected", func() bool { return d.Gen.Status().StreamConnected })
	if v := gaugeValue(t, d, "pleg_evented_stream_down_seconds"); v != 0 {
		t.Errorf("connected: %v, want 0", v)
	}
	rt.SetOpError(runtime.OpGetContainerEvents, status.Error(codes.Unavailable, "stream refused"))
	rt.EndStreams(status.Error(codes.Unavailable, "runtime restarting"))
	eventually(t, "the stream down for a while", func() bool {
		return gaugeValue(t, d, "pleg_evented_stream_down_seconds") > 0.05
	})
	rt.SetOpError(runtime.OpGetContainerEvents, nil)
	eventually(t, "the stream back", func() bool { return gaugeValue(t, d, "pleg_evented_stream_down_seconds") == 0 })
}
