// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// runDaemon runs a daemon with cfg, quiet unless cfg says otherwise,
// until the test ends or stop is called.
func runDaemon(t *testing.T, cfg Config) (d *Daemon, stop func() error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var (
		once    sync.Once
		stopErr error
	)
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				t.Error("the daemon did not stop")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return d, stop
}

func startDaemon(t *testing.T, rt *fakeruntime.Runtime, listen string) (*Daemon, *http.Client, string, func() error) {
	t.Helper()
	return startDaemonCfg(t, Config{Runtime: rt, Listen: listen})
}

// startDaemonCfg runs a daemon relisting every 20 ms, and returns a client
// of its API and the API's base URL.
func startDaemonCfg(t *testing.T, cfg Config) (*Daemon, *http.Client, string, func() error) {
	t.Helper()
	cfg.Generator.RelistPeriod = 20 * time.Millisecond
	d, stop := runDaemon(t, cfg)
	client, base := http.DefaultClient, "http://"+d.Addr()
	if path, ok := strings.CutPrefix(d.Addr(), "unix://"); ok {
		client, base = unixClient(path), "http://pleg"
	}
	return d, client, base, stop
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDaemon(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "unix://" + filepath.Join(t.TempDir(), "api.sock")} {
		t.Run(listen, func(t *testing.T) {
			rt := fakeruntime.New(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "shop",
				Sandboxes:  []fakeruntime.Sandbox{{ID: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
				Containers: []fakeruntime.Container{{ID: "c1", Name: "nginx", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
			})
			d, c, base, stop := startDaemon(t, rt, listen)

			// Ready: the first relist is written, /v1/pods is whole.
			eventually(t, "ready", func() bool {
				code, body := get(t, c, base+"/readyz")
				return code == 200 && body == "ok\n"
			})
			if code, body := get(t, c, base+"/healthz"); code != 200 || body != "ok\n" {
				t.Errorf("ready yet /healthz = %d %q", code, body)
			}
			_, body := get(t, c, base+"/v1/pods")
			var pods api.PodList
			if err := json.Unmarshal([]byte(body), &pods); err != nil || len(pods.Pods) != 1 || pods.Pods[0].Containers[0].ID != "c1" {
				t.Errorf("/v1/pods = %s (%v)", body, err)
			}
			_, metrics := get(t, c, base+"/metrics")
			for _, name := range []string{"kubelet_pleg_relist_duration_seconds_bucket", "kubelet_runtime_operations_total{operation_type=\"list_containers\"}", "go_goroutines", "process_resident_memory_bytes"} {
				if !strings.Contains(metrics, name) {
					t.Errorf("/metrics lacks %s", name)
				}
			}

			// A live stream sees the container die.
			resp, err := c.Get(base + "/v1/events?pod=web")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_ = rt.SetContainerState("c1", runtimeapi.ContainerState_CONTAINER_EXITED, 3)
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			var ev api.Event
			if err != nil || json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "ContainerDied" || ev.ContainerID != "c1" {
				t.Errorf("stream line %q (%v)", line, err)
			}

			// Stopping ends the stream cleanly and returns nil.
			if err := stop(); err != nil {
				t.Errorf("Run after stop = %v", err)
			}
			if rest, err := io.ReadAll(resp.Body); err != nil {
				t.Errorf("stream after stop: %q, %v; want a clean end", rest, err)
			}
			if path, ok := strings.CutPrefix(d.Addr(), "unix://"); ok {
				for _, p := range []string{path, path + ".lock"} {
					if _, err := os.Stat(p); !os.IsNotExist(err) {
						t.Errorf("%s is left behind: %v", p, err)
					}
				}
			}
		})
	}
}

func TestListenErrors(t *testing.T) {
	for _, addr := range []string{"localhost", "unix://relative.sock", "256.0.0.1:80"} {
		if _, err := Listen(addr, ""); err == nil {
			t.Errorf("Listen(%q) succeeded", addr)
		}
	}
	lis, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lis.Close() }()
	// A port in use fails at New, before anything runs.
	_, err = New(Config{Runtime: fakeruntime.New(), Listen: lis.Addr().String(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("New on a busy port = %v", err)
	}
}
