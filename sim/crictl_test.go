package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// crictlPath finds crictl: $CRICTL, else on PATH. To get it:
// go install sigs.k8s.io/cri-tools/cmd/crictl@v1.36.0 (or build its
// module's ./cmd/crictl with -mod=mod when the proxy has no version list).
func crictlPath(t *testing.T) string {
	if p := os.Getenv("CRICTL"); p != "" {
		return p
	}
	p, err := exec.LookPath("crictl")
	if err != nil {
		t.Skip("crictl is not installed (set CRICTL or put it on PATH)")
	}
	return p
}

// crictl works against the simulator: pods, ps, inspect, inspectp,
// images, pull, info and events.
func TestCrictl(t *testing.T) {
	bin := crictlPath(t)
	s := startSim(t, Options{Pods: 3, Containers: 2})
	// A config of our own: the machine's /etc/crictl.yaml is not ours.
	config := filepath.Join(t.TempDir(), "crictl.yaml")
	if err := os.WriteFile(config, []byte("runtime-endpoint: "+s.Endpoint()+"\nimage-endpoint: "+s.Endpoint()+"\ntimeout: 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CRI_CONFIG_FILE="+config)
	args := func(rest ...string) []string {
		return append([]string{"--runtime-endpoint", s.Endpoint(), "--image-endpoint", s.Endpoint(), "--timeout", "10s"}, rest...)
	}
	run := func(rest ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args(rest...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("crictl %s: %v\n%s", strings.Join(rest, " "), err, out)
		}
		return string(out)
	}

	if out := run("version"); !strings.Contains(out, RuntimeName) {
		t.Errorf("crictl version:\n%s", out)
	}
	pods := run("pods", "-q", "--no-trunc")
	if ids := strings.Fields(pods); len(ids) != 3 || len(ids[0]) != 64 {
		t.Fatalf("crictl pods -q:\n%s", pods)
	}
	if out := run("pods", "--namespace", "sim"); strings.Count(out, "Ready") != 3 || !strings.Contains(out, "sim-0") {
		t.Errorf("crictl pods:\n%s", out)
	}
	ps := run("ps", "-a", "-q", "--no-trunc")
	ids := strings.Fields(ps)
	if len(ids) != 6 {
		t.Fatalf("crictl ps -a -q:\n%s", ps)
	}
	if out := run("ps"); strings.Count(out, "Running") != 6 {
		t.Errorf("crictl ps:\n%s", out)
	}
	var inspect struct {
		Status struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"status"`
		Info map[string]any `json:"info"`
	}
	// A truncated ID resolves, as with containerd.
	if err := json.Unmarshal([]byte(run("inspect", ids[0][:13])), &inspect); err != nil || inspect.Status.ID != ids[0] || inspect.Status.State != "CONTAINER_RUNNING" || inspect.Info["sandboxID"] == nil {
		t.Errorf("crictl inspect: %+v, %v", inspect, err)
	}
	var inspectp struct {
		Status struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"status"`
	}
	pod := strings.Fields(pods)[0]
	if err := json.Unmarshal([]byte(run("inspectp", pod)), &inspectp); err != nil || inspectp.Status.ID != pod || inspectp.Status.State != "SANDBOX_READY" {
		t.Errorf("crictl inspectp: %+v, %v", inspectp, err)
	}
	run("pull", "busybox:1.36")
	if out := run("images"); !strings.Contains(out, "busybox") || !strings.Contains(out, "agnhost") {
		t.Errorf("crictl images:\n%s", out)
	}
	run("rmi", "busybox:1.36")
	if out := run("info"); !strings.Contains(out, "RuntimeReady") {
		t.Errorf("crictl info:\n%s", out)
	}
	run("stop", ids[0])
	if out := run("ps", "-a", "--state", "exited"); !strings.Contains(out, ids[0][:13]) {
		t.Errorf("crictl ps --state exited:\n%s", out)
	}

	// crictl events prints each event as indented JSON.
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args("events")...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cancel()
	// The first subscriber gets the backlog: the stop above.
	eventually(t, "crictl events to subscribe", func() bool { return s.Stats().Subscribers == 1 })
	client := dial(t, s)
	run2, err := client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podSandboxConfig("crictl", "uid-crictl")})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.Contains(line, `"containerId"`) {
			seen = append(seen, line)
		}
		if strings.Contains(line, run2.GetPodSandboxId()) && strings.Contains(strings.Join(seen, ""), run2.GetPodSandboxId()) && len(seen) >= 3 {
			break
		}
	}
	all := strings.Join(seen, "\n")
	if !strings.Contains(all, ids[0]) || strings.Count(all, run2.GetPodSandboxId()) < 2 {
		t.Errorf("crictl events printed:\n%s", all)
	}
}
