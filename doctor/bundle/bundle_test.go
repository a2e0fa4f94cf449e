// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/flightrec"
)

// secret is in every value planted where a careless bundle would pick
// it up; no file of the bundle may hold it.
const secret = "s3cr3t"

// fakeCRI answers the four calls a bundle makes, with secrets in every
// place the CRI can carry them: annotations, user labels, the verbose
// info of Status (returned even when not asked for).
type fakeCRI struct {
	runtimeapi.RuntimeServiceClient
	hang bool
}

func (f *fakeCRI) wait(ctx context.Context, _ string) error {
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeCRI) Version(ctx context.Context, _ *runtimeapi.VersionRequest, _ ...grpc.CallOption,
) (*runtimeapi.VersionResponse, error) {
	if err := f.wait(ctx, "Version"); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.4.2", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeCRI) Status(ctx context.Context, _ *runtimeapi.StatusRequest, _ ...grpc.CallOption,
) (*runtimeapi.StatusResponse, error) {
	if err := f.wait(ctx, "Status"); err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{{Type: "RuntimeReady", Status: true}}},
		Info:   map[string]string{"config": `{"registry":{"configs":{"r":{"auth":{"password":"` + secret + `"}}}}}`},
	}, nil
}

func (f *fakeCRI) ListPodSandbox(ctx context.Context, _ *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption,
) (*runtimeapi.ListPodSandboxResponse, error) {
	if err := f.wait(ctx, "ListPodSandbox"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{
		Id:       "sb-1",
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "shop", Uid: "uid-1"},
		State:    runtimeapi.PodSandboxState_SANDBOX_READY,
		Labels:   map[string]string{"io.kubernetes.pod.name": "web", "team-token": secret},
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{"containers":[` +
			`{"env":[{"name":"DB_PASSWORD","value":"` + secret + `"}]}]}}`},
	}}}, nil
}

func (f *fakeCRI) ListContainers(ctx context.Context, _ *runtimeapi.ListContainersRequest, _ ...grpc.CallOption,
) (*runtimeapi.ListContainersResponse, error) {
	if err := f.wait(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{
		Id: "c-1", PodSandboxId: "sb-1", Metadata: &runtimeapi.ContainerMetadata{Name: "nginx"},
		Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Labels:      map[string]string{"io.kubernetes.container.name": "nginx", "api-key": secret},
		Annotations: map[string]string{"io.kubernetes.container.env": secret},
	}}}, nil
}

// hostRoot makes a host's files with secrets planted: containerd's
// configuration with registry credentials and headers, and logs of the
// runtime and the kubelet with tokens, passwords and env values.
func hostRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/containerd/config.toml": `version = 3
root = "/var/lib/containerd"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.grpc.v1.cri".registry.configs."reg.example".auth]
  username = "deploy-` + secret + `"
  password = "` + secret + `"
  auth = "ZGVwbG95OnMzY3IzdA==` + secret + `"
  identitytoken = "` + secret + `"
[plugins."io.containerd.grpc.v1.cri".registry.headers]
  X-Api-Key = ["` + secret + `"]
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = true
  BinaryName = "/usr/bin/runc"
`,
		"var/log/containerd.log": strings.Join([]string{
			`time="2026-11-26T21:22:33Z" level=info msg="PullImage \"reg.example/app:1\" with Authorization: Bearer ` + secret + `abcdef"`,
			`time="2026-11-26T21:22:34Z" level=debug msg="token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ` + secret + `In0.c2lnbmF0dXJl"`,
			`time="2026-11-26T21:22:35Z" level=info msg="resolving https://deploy:` + secret + `@reg.example/v2/"`,
			`time="2026-11-26T21:22:36Z" level=debug msg="CreateContainer Envs:[]*KeyValue{&KeyValue{Key:DB_PASSWORD,Value:` +
				secret + `,},}"`,
			`time="2026-11-26T21:22:37Z" level=debug msg="spec" env:[PATH=/bin DB_PASSWORD=` + secret + `]`,
			`time="2026-11-26T21:22:38Z" level=error msg="ListContainers took 2m0s: context deadline exceeded"`,
		}, "\n") + "\n",
		"var/log/kubelet.log": strings.Join([]string{
			`I1126 21:22:33 kubelet.go:1] "SyncLoop (PLEG): event for pod" pod="shop/web"`,
			`I1126 21:22:34 kuberuntime.go:1] pod spec {"env":[{"name":"DB_PASSWORD","value":"` + secret + `"}]}`,
			`I1126 21:22:35 round_trippers.go:1] curl -H "Authorization: Basic ZGVwbG95OnMzY3IzdA` + secret + `"`,
			`I1126 21:22:36 flags.go:1] FLAG: --bootstrap-token="abcdef.` + secret + `" --password=` + secret,
			`E1126 21:22:37 kubelet.go:1] "PLEG is not healthy" err="pleg was last seen active 3m0s ago"`,
		}, "\n") + "\n",
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// noJournal is a host without journalctl.
type noJournal struct{}

func (noJournal) LookPath(string) (string, error) { return "", errors.New("not found") }
func (noJournal) Run(context.Context, int64, string, ...string) ([]byte, error) {
	return nil, errors.New("not run")
}

// fakeRecordings holds one recording of the incident and one too old.
type fakeRecordings struct{ now time.Time }

func (f fakeRecordings) List() ([]flightrec.Entry, error) {
	return []flightrec.Entry{
		{Name: "20261126T101010.000Z-slow-call", Trigger: "slow-call", Time: f.now.Add(-5 * time.Hour)},
		{Name: "20261126T212233.000Z-stuck-process", Trigger: "stuck-process", Time: f.now.Add(-time.Minute)},
	}, nil
}

func (f fakeRecordings) Read(name string) (*flightrec.Recording, error) {
	return &flightrec.Recording{Version: 1, Name: name, Trigger: "stuck-process", Reason: "containerd is stopped (T)"}, nil
}

// read returns the bundle's files by their name under the top directory.
func read(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		top, rest, _ := strings.Cut(h.Name, "/")
		if !strings.HasPrefix(top, "pleg-bundle-node-1-") {
			t.Errorf("%s is not under the bundle's top directory", h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[rest] = string(data)
	}
	return files
}

func testConfig(t *testing.T, cri runtimeapi.RuntimeServiceClient) Config {
	now := time.Date(2026, 11, 26, 21, 23, 0, 0, time.UTC)
	return Config{
		Node: "node-1", Report: &doctor.Report{}, Recordings: fakeRecordings{now: now}, CRI: cri,
		Endpoint: "unix:///run/containerd/containerd.sock", Root: hostRoot(t), Runner: noJournal{},
		Now: func() time.Time { return now }, CallTimeout: 200 * time.Millisecond,
	}
}

// TestNoSecretInTheBundle plants secrets in every source a bundle reads
// (the CRI's annotations, labels and verbose status, the runtime's
// registry credentials and headers, tokens, passwords and env values in
// the logs) and finds none of them in any file of the archive, while
// what a maintainer needs is there.
func TestNoSecretInTheBundle(t *testing.T) {
	var out bytes.Buffer
	man, err := Write(context.Background(), &out, testConfig(t, &fakeCRI{}))
	if err != nil {
		t.Fatal(err)
	}
	files := read(t, out.Bytes())
	for name, data := range files {
		if strings.Contains(data, secret) {
			i := strings.Index(data, secret)
			t.Errorf("%s holds a planted secret: ...%s...", name, data[max(0, i-80):min(len(data), i+20)])
		}
	}
	want := map[string][]string{
		"doctor/report.json": {`"verdict"`},
		"doctor/report.html": {"<html"},
		"recordings/20261126T212233.000Z-stuck-process.json": {"containerd is stopped"},
		"runtime/version.json":                               {"v2.4.2"},
		"runtime/status.json":                                {"RuntimeReady"},
		"runtime/sandboxes.json":                             {`"shop"`, "io.kubernetes.pod.name"},
		"runtime/containers.json":                            {"nginx:1.27"},
		"runtime/config.json":                                {"overlayfs", "registry.k8s.io/pause:3.10", "/usr/bin/runc", "reg.example", Redacted},
		"logs/containerd.log":                                {"ListContainers took 2m0s", "PullImage", Redacted},
		"logs/kubelet.log":                                   {"PLEG is not healthy", "SyncLoop (PLEG)"},
		"manifest.json":                                      {`"missing"`},
		"README.txt":                                         {"never in it"},
	}
	for name, subs := range want {
		data, ok := files[name]
		if !ok {
			t.Errorf("no %s in the bundle; it has %v", name, keys(files))
			continue
		}
		for _, s := range subs {
			if !strings.Contains(data, s) {
				t.Errorf("%s lacks %q:\n%s", name, s, data)
			}
		}
	}
	if _, ok := files["recordings/20261126T101010.000Z-slow-call.json"]; ok {
		t.Error("a recording older than the window is in the bundle")
	}
	if len(files) != len(man.Files) {
		t.Errorf("%d files, the manifest names %d", len(files), len(man.Files))
	}
	t.Logf("bundle: %d bytes compressed, files %v", out.Len(), keys(files))
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRuntimeHung: with a runtime that answers nothing, the bundle still
// comes, within the calls' deadlines, with the CRI parts named missing.
func TestRuntimeHung(t *testing.T) {
	cri := &fakeCRI{hang: true}
	start := time.Now()
	var out bytes.Buffer
	man, err := Write(context.Background(), &out, testConfig(t, cri))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("a hung runtime held the bundle %v", took)
	}
	files := read(t, out.Bytes())
	for _, name := range []string{"runtime/version.json", "runtime/sandboxes.json", "runtime/containers.json"} {
		if _, ok := files[name]; ok {
			t.Errorf("%s from a hung runtime", name)
		}
	}
	var missing []string
	for _, m := range man.Missing {
		missing = append(missing, m.Part)
	}
	if !strings.Contains(strings.Join(missing, " "), "runtime/containers.json") {
		t.Errorf("missing parts %v do not name the lists", missing)
	}
	// The configuration is read from the files, whatever the runtime does.
	if !strings.Contains(files["runtime/config.json"], "overlayfs") {
		t.Errorf("no configuration with the runtime hung: %v", keys(files))
	}
}

// TestBounded: the archive's content stays within MaxBytes, and what is
// cut is marked.
func TestBounded(t *testing.T) {
	cfg := testConfig(t, &fakeCRI{})
	cfg.MaxBytes = 4096
	var out bytes.Buffer
	man, err := Write(context.Background(), &out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	total, cut := 0, false
	for _, f := range man.Files {
		if f.Name != "manifest.json" && f.Name != "README.txt" {
			total += f.Bytes
		}
		cut = cut || f.Truncated
	}
	if total > 4096 || !cut {
		t.Errorf("%d bytes of content, cut %v: want at most 4096, cut", total, cut)
	}
}

func TestRedactLine(t *testing.T) {
	for _, tc := range []struct{ in, keep string }{
		{`Authorization: Bearer abcdef` + secret, "Authorization: Bearer"},
		{`url=https://u:` + secret + `@host/x`, "@host/x"},
		{`"password": "` + secret + `"`, `"password"`},
		{`token=` + secret + ` next`, "next"},
		{`Envs:[]*KeyValue{&KeyValue{Key:A,Value:` + secret + `,},}`, "Key:A"},
		{`x eyJhbGciOiJIUzI1NiJ9.eyJ` + secret + `.sig y`, "x "},
	} {
		got := RedactLine(tc.in)
		if strings.Contains(got, secret) || !strings.Contains(got, tc.keep) {
			t.Errorf("RedactLine(%q) = %q", tc.in, got)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{MaxBytes: -1}, {Root: "relative"}, {Since: -time.Second}} {
		if _, err := Write(context.Background(), io.Discard, c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
