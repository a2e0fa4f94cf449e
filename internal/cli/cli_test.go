package cli

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
		{[]string{"pods", "--relist-period=2s", "--relist-threshold=1s"}, "--relist-threshold 1s: must be greater than --relist-period 2s"},
		{[]string{"run", "--relist-period=0s"}, "--relist-period 0s: must be positive"},
		{[]string{"watch", "--mode=fast"}, `--mode "fast": want generic, evented or auto`},
		{[]string{"pods", "--inspect-concurrency=0"}, "--inspect-concurrency 0: must be at least 1"},
		{[]string{"pods", "--log-format=xml"}, `--log-format "xml": want text or json`},
		{[]string{"pods", "-r", "tcp://10.0.0.1:1234"}, "only unix sockets are supported"},
		{[]string{"pods", "-o", "xml"}, `--output "xml": want table, json, yaml`},
		{[]string{"watch", "-o", "yaml"}, `--output "yaml": want table, json`},
		{[]string{"watch", "--type", "ContainerExploded"}, `unknown event type "ContainerExploded"`},
		{[]string{"run", "--event-buffer=0"}, "--event-buffer 0: must be at least 1"},
		{[]string{"run", "--simulate", "--sim-churn=crash=fast"}, "crash"},
		{[]string{"run", "--simulate", "--sim-latency=slow"}, "slow"},
		{[]string{"sim"}, "--socket is required"},
		{[]string{"demo", "--duration=-1s"}, "--duration -1s"},
		{[]string{"pods", "--timeout=-1s"}, "--timeout -1s: must be positive"},
		{[]string{"pods", "--relist-period=zero"}, `invalid argument "zero"`},
		{[]string{"doctor", "--budget=0s"}, "--budget 0s: must be positive"},
		{[]string{"doctor", "-o", "yaml"}, `--output "yaml": want text, json`},
		{[]string{"doctor", "--concurrency=0"}, "--concurrency 0: must be at least 1"},
		{[]string{"doctor", "--sample=-1"}, "--sample -1: must be 0 (every pod) or more"},
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

func TestConfigFileEnvironmentAndFlags(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "pleg.yaml")
	if err := os.WriteFile(config, []byte("runtime-endpoint: unix:///from/config.sock\nrelist-period: 2s\ninspect-concurrency: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// version prints the endpoint it tried: "runtime: unreachable at <endpoint>: ...".
	tried := func(t *testing.T, args ...string) string {
		t.Helper()
		out, _, err := run(t, append([]string{"version", "--config", config}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(out, "unreachable at ")
		if !ok {
			t.Fatalf("version printed %q", out)
		}
		ep, _, _ := strings.Cut(after, ": ")
		return ep
	}
	if got := tried(t); got != "unix:///from/config.sock" {
		t.Errorf("from the config file: %s", got)
	}
	t.Setenv("CONTAINER_RUNTIME_ENDPOINT", "unix:///from/env.sock")
	if got := tried(t); got != "unix:///from/env.sock" {
		t.Errorf("the environment should beat the config file: %s", got)
	}
	if got := tried(t, "-r", "unix:///from/flag.sock"); got != "unix:///from/flag.sock" {
		t.Errorf("a flag should beat the environment: %s", got)
	}

	// A config value that fails validation is refused like a flag.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("relist-period: 5m\n"), 0o644)
	if _, _, err := run(t, "pods", "--config", bad); err == nil || !strings.Contains(err.Error(), "--relist-threshold 3m0s: must be greater than --relist-period 5m0s") {
		t.Errorf("bad config value: %v", err)
	}
	// A key that is no flag is refused, not ignored.
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(typo, []byte("relist-perod: 2s\n"), 0o644)
	if _, _, err := run(t, "pods", "--config", typo); err == nil || !strings.Contains(err.Error(), `"relist-perod" is not a flag of this command`) {
		t.Errorf("unknown config key: %v", err)
	}
	if _, _, err := run(t, "pods", "--config", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing config file: %v", err)
	}
}
