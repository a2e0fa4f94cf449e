// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// namedRuntime is a fake runtime that tells its name and version, and its
// endpoint, as the CRI adapter does; down makes Version fail.
type namedRuntime struct {
	*fakeruntime.Runtime
	name, version, endpoint string
	down                    bool
}

func (r *namedRuntime) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	if r.down {
		return nil, status.Error(codes.Unavailable, "connection refused")
	}
	return &runtimeapi.VersionResponse{RuntimeName: r.name, RuntimeVersion: r.version, RuntimeApiVersion: "v1"}, nil
}

func (r *namedRuntime) Endpoint() string { return r.endpoint }

// syncLog is a log a daemon writes while the test reads it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The issue 31 node: a state directory left by a pleg over another runtime
// (a simulator, another containerd; or the node moved from containerd to
// CRI-O). The daemon over runtime B reports none of runtime A's
// containers, gives a client resuming from A's numbers a gap, and names
// both runtimes in the log; runtime A upgraded goes on from its journal.
func TestStateDirOfAnotherRuntime(t *testing.T) {
	dir := t.TempDir()
	endpoint := "unix:///run/test/cri.sock"
	a := &namedRuntime{Runtime: onePod(), name: "runtime-a", version: "1.0", endpoint: endpoint}
	run := func(rt *namedRuntime) (*Daemon, *syncLog, func() error) {
		t.Helper()
		logs := &syncLog{}
		cfg := Config{Runtime: rt, Listen: "127.0.0.1:0", StateDir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}}
		d, stop := runDaemon(t, cfg)
		eventually(t, "the first relist written", func() bool { return !d.Cache.GlobalTime().IsZero() })
		return d, logs, stop
	}
	ids := func(d *Daemon, after uint64) (gap bool, containers []string) {
		entries, _ := d.Journal.Read(after, 1000)
		for i, e := range entries {
			if e.Gap {
				gap = gap || i == 0
				continue
			}
			containers = append(containers, string(e.Event.Type)+" "+e.Event.ContainerID)
		}
		slices.Sort(containers)
		return gap, containers
	}

	d, _, stopA := run(a)
	stop := stopA
	if _, got := ids(d, 0); strings.Join(got, ",") != "ContainerStarted c1,ContainerStarted s1" {
		t.Errorf("over runtime A: %v, want c1 and its sandbox started", got)
	}
	last := d.Journal.Last()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A, upgraded: the same runtime; nothing changed, nothing reported.
	a.version = "1.1"
	d, _, stop = run(a)
	if o := recoveries(t, d, journal.OutcomeClean); o != 1 {
		t.Errorf("over runtime A upgraded: recoveries{clean} = %v, want 1", o)
	}
	if gap, got := ids(d, last); gap || len(got) != 0 {
		t.Errorf("over runtime A upgraded: gap %v, events %v after %d; want none", gap, got, last)
	}
	last = d.Journal.Last()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Runtime B on the same socket, with pods of its own.
	b := &namedRuntime{Runtime: fakeruntime.New(fakeruntime.Pod{UID: "u2", Name: "db", Namespace: "shop",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "s2", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []fakeruntime.Container{{ID: "c2", Name: "pg", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	}), name: "runtime-b", version: "1.0", endpoint: endpoint}
	d, logs, stop := run(b)
	gap, got := ids(d, last)
	if !gap || strings.Join(got, ",") != "ContainerStarted c2,ContainerStarted s2" {
		t.Errorf("over runtime B, resuming from A's %d: gap %v, events %v; want a gap, then c2 and its sandbox started alone",
			last, gap, got)
	}
	if _, all := ids(d, 0); slices.ContainsFunc(all, func(s string) bool { return strings.HasSuffix(s, " c1") || strings.HasSuffix(s, " s1") }) {
		t.Errorf("over runtime B, runtime A's container is reported: %v", all)
	}
	if o := recoveries(t, d, journal.OutcomeOtherRuntime); o != 1 {
		t.Errorf("recoveries{other_runtime} = %v, want 1", o)
	}
	for _, want := range []string{"runtime-a 1.1 at " + endpoint, "runtime-b 1.0 at " + endpoint} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not name %q:\n%s", want, logs.String())
		}
	}
	if aside, _ := os.ReadDir(filepath.Join(dir, "set-aside")); len(aside) != 1 {
		t.Errorf("set aside: %v, want A's store", aside)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// B down at start: it cannot vouch for B's store, which is set aside.
	b.down = true
	d, stop = runDaemon(t, Config{Runtime: b, Listen: "127.0.0.1:0", StateDir: dir, IdentifyTimeout: time.Second,
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})
	if o := recoveries(t, d, journal.OutcomeUnconfirmedRuntime); o != 1 {
		t.Errorf("over a runtime that does not answer: recoveries{unconfirmed_runtime} = %v, want 1", o)
	}
	_ = stop()
}

// recoveries is pleg_journal_recoveries_total{outcome} of d.
func recoveries(t *testing.T, d *Daemon, outcome string) float64 {
	t.Helper()
	families, err := d.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "pleg_journal_recoveries_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// One socket under two names is one endpoint.
func TestCanonicalEndpoint(t *testing.T) {
	dir := t.TempDir()
	crioDir := filepath.Join(dir, "run", "crio")
	if err := os.MkdirAll(crioDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(crioDir, "crio.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "run"), filepath.Join(dir, "varrun")); err != nil {
		t.Fatal(err)
	}
	crioDirSock, _ := filepath.EvalSymlinks(sock) // t.TempDir may itself sit under a link
	want := "unix://" + crioDirSock
	for _, ep := range []string{"unix://" + sock, sock, "unix://" + filepath.Join(dir, "varrun", "crio", "crio.sock"),
		"unix://" + filepath.Join(dir, "varrun", "crio", ".", "crio.sock")} {
		if got := canonicalEndpoint(ep); got != want {
			t.Errorf("canonicalEndpoint(%q) = %q, want %q", ep, got, want)
		}
	}
	if got := canonicalEndpoint("unix:///nowhere/x.sock"); got != "unix:///nowhere/x.sock" {
		t.Errorf("a socket that is not there: %q", got)
	}
}
