// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// run runs the pleg command with args and returns its output and error.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestInvalidFlagsAreRefusedBeforeAnythingStarts(t *testing.T) {
	// The runtime endpoint points nowhere: any command that started would
	// fail differently, or hang.
	nowhere := "--runtime-endpoint=unix:///nonexistent/cri.sock"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pods", "--relist-period=2s", "--relist-threshold=1s"}, "relist threshold 1s must be greater than the relist period 2s"},
		{[]string{"run", "--relist-period=0s"}, "--relist-period 0s: must be positive"},
		{[]string{"pods", "--relist-period=-1s"}, "relist period -1s must be positive"},
		{[]string{"watch", "--mode=fast"}, `mode "fast": want auto, generic or evented`},
		{[]string{"pods", "--inspect-concurrency=0"}, "--inspect-concurrency 0: must be positive"},
		{[]string{"pods", "--inspect-concurrency=-2"}, "inspect concurrency -2 must be positive"},
		{[]string{"pods", "--log-format=xml"}, `--log-format "xml": want text, json`},
		{[]string{"pods", "-r", "tcp://10.0.0.1:1234"}, "only unix sockets are supported"},
		{[]string{"pods", "-o", "xml"}, `--output "xml": want table, json, yaml`},
		{[]string{"watch", "-o", "yaml"}, `--output "yaml": want table, json`},
		{[]string{"watch", "--type", "ContainerExploded"}, `unknown event type "ContainerExploded"`},
		{[]string{"run", "--event-buffer=0"}, "--event-buffer 0: must be at least 1"},
		{[]string{"run", "--flight-recorder-fraction=1.5"}, "--flight-recorder-fraction 1.5: want more than 0, at most 1"},
		{[]string{"doctor", "recordings", "-o", "yaml"}, `--output "yaml": want text, json`},
		{[]string{"run", "--simulate", "--sim-churn=crash=fast"}, "crash"},
		{[]string{"run", "--simulate", "--sim-latency=slow"}, "slow"},
		{[]string{"sim"}, "--socket is required"},
		{[]string{"sim", "--socket=/nonexistent/s.sock", "--registry=/nonexistent/registry.yaml"}, "--registry: open /nonexistent/registry.yaml"},
		{[]string{"sim", "--socket=/nonexistent/s.sock", "--cgroup-driver=cgroupv3"}, `--cgroup-driver: cgroup driver "cgroupv3": want systemd or cgroupfs`},
		{[]string{"demo", "--duration=-1s"}, "--duration -1s"},
		{[]string{"pods", "--timeout=-1s"}, "--timeout -1s: must be positive"},
		{[]string{"version", "-t", "0"}, "--timeout 0s: must be positive (leave it out for the command's default)"},
		{[]string{"run", "--simulate", "--sim-pods=-1"}, "pods -1 must not be negative"},
		{[]string{"demo", "--exited=2", "--containers=0"}, "exited containers need at least one container per pod"},
		{[]string{"watch", "--server", "ftp://x"}, `scheme "ftp" is not served`},
		{[]string{"watch", "--server", "127.0.0.1:9847"}, "has no scheme"},
		{[]string{"doctor", "--server", "gopher://x"}, `scheme "gopher" is not served`},
		{[]string{"watch", "--server", "http://node-1:9847", "--certificate-authority", "ca.pem"}, "TLS settings need an https:// server"},
		{[]string{"watch", "--client-certificate", "c.pem"}, "need --server"},
		{[]string{"doctor", "--server", "https://node-1:9847", "--certificate-authority", "/nonexistent/ca.pem"}, "no such file"},
		{[]string{"watch", "--wait=-1s"}, "--wait -1s: must be 0 (keep waiting) or more"},
		{[]string{"pods", "--relist-period=zero"}, `invalid argument "zero"`},
		{[]string{"doctor", "--budget=0s"}, "--budget 0s: must be positive"},
		{[]string{"doctor", "-o", "yaml"}, `--output "yaml": want text, json`},
		{[]string{"doctor", "--concurrency=0"}, "--concurrency 0: must be positive"},
		{[]string{"doctor", "--sample=-1"}, "sample -1 must not be negative"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := tc.args
			if !slices.Contains(args, "-r") {
				args = append(args, nowhere)
			}
			_, _, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// tried runs pleg version, which fails against the nowhere endpoints
// these tests give, and returns the endpoint it tried: "runtime
// unreachable at <endpoint>: ...".
func tried(t *testing.T, args ...string) string {
	t.Helper()
	_, _, err := run(t, append([]string{"version"}, args...)...)
	if err == nil {
		t.Fatal("version reached a runtime")
	}
	_, after, ok := strings.Cut(err.Error(), "runtime unreachable at ")
	if !ok {
		t.Fatalf("version failed with %v", err)
	}
	ep, _, _ := strings.Cut(after, ": ")
	return ep
}

func TestConfigFileEnvironmentAndFlags(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "pleg.yaml")
	if err := os.WriteFile(config, []byte("runtime-endpoint: unix:///from/config.sock\nrelist-period: 2s\ninspect-concurrency: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := tried(t, "--config", config); got != "unix:///from/config.sock" {
		t.Errorf("from the config file: %s", got)
	}
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "unix:///from/env.sock")
	if got := tried(t, "--config", config); got != "unix:///from/env.sock" {
		t.Errorf("the environment should beat the config file: %s", got)
	}
	if got := tried(t, "--config", config, "-r", "unix:///from/flag.sock"); got != "unix:///from/flag.sock" {
		t.Errorf("a flag should beat the environment: %s", got)
	}

	// A config value that fails validation is refused like a flag.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("relist-period: 5m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "pods", "--config", bad); err == nil || !strings.Contains(err.Error(), "relist threshold 3m0s must be greater than the relist period 5m0s") {
		t.Errorf("bad config value: %v", err)
	}
	if _, _, err := run(t, "pods", "--config", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing config file: %v", err)
	}
}

// One file serves every command: a key another command has is left to
// it, a section under a command's name is that command's alone and beats
// the top level, and a key no command has is a typo.
func TestOneConfigFileForEveryCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	shared := write("shared.yaml", `
runtime-endpoint: unix:///from/top.sock
listen: 127.0.0.1:9847
server: unix:///run/pleg.sock
budget: 30s
pods: 50
version:
  runtime-endpoint: unix:///from/section.sock
run:
  listen: unix:///run/pleg.sock
`)
	// version has none of listen, server, budget or pods: they are
	// another command's.
	if got := tried(t, "--config", shared); got != "unix:///from/section.sock" {
		t.Errorf("version's section should beat the top level: %s", got)
	}
	if got := tried(t, "--config", shared, "-r", "unix:///from/flag.sock"); got != "unix:///from/flag.sock" {
		t.Errorf("a flag should beat the section: %s", got)
	}
	// pods takes none of them either, and reads the top level's endpoint.
	nowhere := "unix://" + dir + "/none.sock"
	_, _, err := run(t, "pods", "--config", shared, "-r", nowhere, "-t", "1s")
	if err == nil || strings.Contains(err.Error(), "config") {
		t.Errorf("pods with the shared file: %v, want only the runtime's failure", err)
	}

	for _, tc := range []struct{ text, want string }{
		{"relist-perod: 2s\n", `"relist-perod" is not a flag of any pleg command`},
		{"run:\n  budget: 1s\n", `run.budget: "budget" is not a flag of pleg run`},
		{"config: other.yaml\n", `"config" is not a flag of any pleg command`},
		{"version:\n  runtime-endpoint: [\n", "--config"},
		{"version:\n  timeout: fast\n", `version.timeout: invalid argument "fast"`},
	} {
		path := write("bad.yaml", tc.text)
		if _, _, err := run(t, "version", "--config", path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %s", tc.text, err, tc.want)
		}
	}
}
