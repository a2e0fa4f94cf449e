// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/plegkit/pleg/internal/testing/cachelock"
)

const crioModule = "github.com/cri-o/cri-o"

// crioBuildTags leave out what needs C libraries this machine kind lacks
// (gpgme, btrfs, devicemapper).
var crioBuildTags = []string{
	"containers_image_openpgp",
	"exclude_graphdriver_btrfs",
	"exclude_graphdriver_devicemapper",
}

// crioNoSumDB are the modules of CRI-O's dependency graph whose
// pseudo-versions the checksum database does not answer for.
const crioNoSumDB = "github.com/containerd/nri,github.com/CloudNativeAI"

type crio struct{ spec Spec }

func (c crio) install(ctx context.Context, logf func(string, ...any)) (Binaries, error) {
	return InstallCRIO(ctx, c.spec.Version, logf)
}

// InstallCRIO makes sure CRI-O of the given module version is built in
// <cache>/crio/<version>/bin, with pinns from the module's C source, and
// that conmon, skopeo and runc are installed (Debian's packages, with
// apt-get when missing); it returns where everything is, and builds the
// test image. crio is built with cgo through a scratch module that
// requires it (CRI-O's go.mod has replace directives, which `go install
// pkg@version` refuses): about five minutes on 2 cores, once. Debian's
// crun is too old for the OCI spec CRI-O writes; runc works.
func InstallCRIO(ctx context.Context, version string, logf func(string, ...any)) (Binaries, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var b Binaries
	var err error
	for _, tool := range []struct {
		dst       *string
		name, pkg string
	}{{&b.Conmon, "conmon", "conmon"}, {&b.Skopeo, "skopeo", "skopeo"}} {
		if *tool.dst, err = aptBinary(ctx, tool.name, tool.pkg, logf); err != nil {
			return b, err
		}
	}
	if b.CNIPlugins, err = CNIPlugins(ctx, logf); err != nil {
		return b, err
	}
	dir, err := cacheSubdir("crio", version)
	if err != nil {
		return b, err
	}
	unlock, err := cachelock.Acquire(dir + ".lock")
	if err != nil {
		return b, err
	}
	defer unlock()
	bin := filepath.Join(dir, "bin")
	src := filepath.Join(dir, "src")
	b.Runtime = filepath.Join(bin, "crio")
	b.Pinns = filepath.Join(bin, "pinns")
	b.Version = version
	if v, err := moduleVersion(b.Runtime, crioModule); err != nil || v != version {
		logf("runtimetest: building CRI-O %s into %s, once (about five minutes)", version, bin)
		done := timed(logf, "building CRI-O "+version)
		err := buildThroughScratchModule(ctx, src, bin, crioModule, version,
			[]string{"CGO_ENABLED=1", "GONOSUMDB=" + crioNoSumDB}, crioBuildTags, "crio")
		done()
		if err != nil {
			return b, fmt.Errorf("runtimetest: CRI-O %s is not in %s and could not be built: %w", version, bin, err)
		}
		if v, err := moduleVersion(b.Runtime, crioModule); err != nil || v != version {
			return b, fmt.Errorf("runtimetest: after building CRI-O %s, %s has version %q (%w)", version, b.Runtime, v, err)
		}
		_ = os.Remove(b.Pinns) // built for another version; absent is as good
	}
	if _, err := os.Stat(b.Pinns); err != nil {
		if err := buildPinns(ctx, src, b.Pinns); err != nil {
			return b, fmt.Errorf("runtimetest: building CRI-O %s's pinns: %w", version, err)
		}
	}
	return b, common(ctx, &b, logf)
}

// CNIPlugins returns the directory of the standard CNI plugins, installing
// Debian's containernetworking-plugins when it is missing. CRI-O reports
// the pod network ready only once its configuration's plugins are there;
// its test pods, on the host network, never run them; a pod network
// (Options.PodNetwork) does.
func CNIPlugins(ctx context.Context, logf func(string, ...any)) (string, error) {
	find := func() string {
		for _, d := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
			if _, err := os.Stat(filepath.Join(d, "loopback")); err == nil {
				return d
			}
		}
		return ""
	}
	if d := find(); d != "" {
		return d, nil
	}
	logf("runtimetest: no CNI loopback plugin, running apt-get install -y containernetworking-plugins")
	if out, err := aptInstall(ctx, "containernetworking-plugins"); err != nil {
		return "", fmt.Errorf(
			"runtimetest: no CNI loopback plugin and `apt-get install -y containernetworking-plugins` failed: %w\n%s",
			err,
			tail(string(out), 20),
		)
	}
	if d := find(); d != "" {
		return d, nil
	}
	return "", errors.New("runtimetest: containernetworking-plugins installed, yet no loopback plugin in /usr/lib/cni " +
		"or /opt/cni/bin")
}

// buildPinns compiles pinns, the C helper that pins a pod's namespaces,
// from the CRI-O module that the scratch module in src requires: static,
// as CRI-O's own Makefile builds it.
func buildPinns(ctx context.Context, src, out string) error {
	goBin, err := goTool()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Dir}}", crioModule)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	modDir, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating the CRI-O module: %w", err)
	}
	cfiles, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(modDir)), "pinns", "src", "*.c"))
	if err != nil || len(cfiles) == 0 {
		return fmt.Errorf("no pinns sources in the CRI-O module at %s (%w)", modDir, err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	args := append([]string{"-std=c99", "-Os", "-Wall", "-Wextra", "-static", "-o", out}, cfiles...)
	if b, err := exec.CommandContext(ctx, cc, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", cc, strings.Join(args, " "), err, tail(string(b), 20))
	}
	return nil
}

// CRI-O keeps everything below the instance directory: its
// containers-storage (vfs: no kernel module, no overlay mounts), its run
// files, exit files, pinned namespaces and logs.
func (c crio) storageRoot(in *Instance) string { return filepath.Join(in.Dir, "storage") }
func (c crio) storageRun(in *Instance) string  { return filepath.Join(in.Dir, "run", "storage") }

func (c crio) env(in *Instance) []string {
	return []string{
		"PATH=" + filepath.Dir(in.Bin.Runc) + string(os.PathListSeparator) + os.Getenv("PATH"),
		// The machine's containers configuration is not ours.
		"CONTAINERS_STORAGE_CONF=" + filepath.Join(in.Dir, "storage.conf"),
		"CONTAINERS_REGISTRIES_CONF=" + filepath.Join(in.Dir, "registries.conf"),
	}
}

func (c crio) command(in *Instance) []string {
	return []string{in.Bin.Runtime,
		"--config", filepath.Join(in.Dir, "crio.conf"),
		"--config-dir", filepath.Join(in.Dir, "crio.conf.d"),
		"--log-level", in.opts.LogLevel}
}

func (c crio) configure(in *Instance) error {
	q := strconv.Quote
	d := func(elem ...string) string { return q(filepath.Join(append([]string{in.Dir}, elem...)...)) }
	files := map[string]string{
		"crio.conf": fmt.Sprintf(`# Generated by github.com/plegkit/pleg/internal/testing/runtimetest (CRI-O).
[crio]
root = %[1]s
runroot = %[2]s
storage_driver = "vfs"
storage_option = []
log_dir = %[3]s
version_file = %[4]s
version_file_persist = %[5]s
# No clean-shutdown file: a CRI-O killed to test a runtime crash must not
# wipe its storage when it comes back.
clean_shutdown_file = ""
internal_repair = false

[crio.api]
listen = %[6]s
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
pinns_path = %[7]s
container_exits_dir = %[8]s
container_attach_socket_dir = %[9]s
namespaces_dir = %[10]s
enable_pod_events = %[11]t
enable_criu_support = false
irqbalance_config_file = ""
cdi_spec_dirs = []
hooks_dir = []
selinux = false

[crio.runtime.runtimes.runc]
runtime_path = %[12]s
runtime_type = "oci"
runtime_root = %[13]s
monitor_path = %[14]s
monitor_cgroup = "pod"

[crio.image]
pause_image = %[15]s
pause_command = "/testimg"
signature_policy = %[16]s
short_name_mode = "disabled"

# Pods use the host network; as for containerd, a network configuration
# that no pod uses, with the machine's plugins so that CRI-O takes it.
[crio.network]
network_dir = %[17]s
plugin_dirs = [%[18]s]

[crio.nri]
enable_nri = false
`,
			q(c.storageRoot(in)), q(c.storageRun(in)), d("pods"), d("run", "version"), d("lib", "version"),
			q(in.socket), q(in.Bin.Pinns), d("run", "exits"), d("run"), d("ns"),
			!c.spec.NoPodEvents,
			q(in.Bin.Runc), d("runc"), q(in.Bin.Conmon),
			q(SandboxImage), d("policy.json"),
			d("cni", "net.d"), q(in.Bin.CNIPlugins)),
		"storage.conf": fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %s\nrunroot = %s\n",
			q(c.storageRoot(in)), q(c.storageRun(in))),
		"registries.conf": "unqualified-search-registries = []\n",
		"policy.json":     `{"default": [{"type": "insecureAcceptAnything"}]}` + "\n",
	}
	for _, sub := range []string{"crio.conf.d", "lib", "run/exits", "ns", "pods", "runc"} {
		if err := os.MkdirAll(filepath.Join(in.Dir, sub), 0o755); err != nil {
			return err
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(in.Dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return writeNetworkConfig(filepath.Join(in.Dir, "cni", "net.d"), "")
}

// importImages copies the test image into CRI-O's containers-storage with
// skopeo, once for each of its names.
func (c crio) importImages(ctx context.Context, in *Instance) error {
	dest := fmt.Sprintf("containers-storage:[vfs@%s+%s]", c.storageRoot(in), c.storageRun(in))
	for _, ref := range []string{SandboxImage, TestImage} {
		cmd := exec.CommandContext(ctx, in.Bin.Skopeo, "--policy", filepath.Join(in.Dir, "policy.json"),
			"copy", "--quiet", "docker-archive:"+in.Bin.ImageTar+":"+ref, dest+ref)
		cmd.Env = append(os.Environ(), c.env(in)[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf(
				"runtimetest: skopeo copy of %s into CRI-O's storage failed: %w\n%s",
				ref,
				err,
				tail(string(out), 20),
			)
		}
	}
	return nil
}
