// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// readEvents reads n events of the daemon's stream after since.
func readEvents(t *testing.T, d *Daemon, since uint64, n int) []api.Event {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/events?since=%d", d.Addr(), since))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var out []api.Event
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		if strings.TrimSpace(line) == "" {
			continue // keep-alive
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func stateConfig(rt *fakeruntime.Runtime, dir string) Config {
	return Config{Runtime: rt, Listen: "127.0.0.1:0", StateDir: dir, Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}}
}

// A daemon started again on its state directory goes on where it
// stopped: the client resumes with its number and gets what changed
// meanwhile, marked, and nothing else.
func TestRestartOnAStateDir(t *testing.T) {
	dir := t.TempDir()
	rt := onePod()
	d, stop := runDaemon(t, stateConfig(rt, dir))
	first := readEvents(t, d, 0, 2) // the sandbox and c1 started
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	_ = rt.SetContainerState("c1", runtimeapi.ContainerState_CONTAINER_EXITED, 2)
	rt.AddContainer(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "shop"},
		fakeruntime.Container{ID: "c2", Name: "nginx", State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	d, _ = runDaemon(t, stateConfig(rt, dir))
	last := first[len(first)-1].Seq
	got := readEvents(t, d, last, 2)
	for i, want := range []string{"ContainerDied c1", "ContainerStarted c2"} {
		ev := got[i]
		if ev.Type+" "+ev.ContainerID != want || !ev.AfterRestart || ev.Seq <= last {
			t.Errorf("event %d after the restart: %+v; want %s, afterRestart, after %d", i, ev, want, last)
		}
	}
}

// A state directory whose journal does not check: the daemon starts, says
// it set the journal aside, and a client resuming from it gets a gap.
func TestStartOnACorruptStateDir(t *testing.T) {
	dir := t.TempDir()
	rt := onePod()
	d, stop := runDaemon(t, stateConfig(rt, dir))
	last := readEvents(t, d, 0, 2)[1].Seq
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segment written")
	}
	if err := os.WriteFile(segs[0], []byte("not a journal at all, sorry"), 0o600); err != nil {
		t.Fatal(err)
	}

	logs := &syncBuffer{}
	cfg := stateConfig(rt, dir)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	d, _ = runDaemon(t, cfg)
	if ev := readEvents(t, d, last, 1)[0]; ev.Type != api.TypeGap || ev.From != last+1 {
		t.Errorf("resuming at %d: %+v, want a gap from %d", last, ev, last+1)
	}
	eventually(t, "readyz to tell", func() bool {
		_, body := get(t, http.DefaultClient, "http://"+d.Addr()+"/readyz?verbose")
		return strings.Contains(body, "journal: "+dir+" (corrupt at start)")
	})
	if !strings.Contains(logs.String(), "moved aside") {
		t.Errorf("the log does not say the journal was set aside:\n%s", logs.String())
	}
}

// syncBuffer lets the daemon's goroutines log into one buffer that the
// test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
