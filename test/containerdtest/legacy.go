package containerdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The legacy runtime is Debian's containerd 1.6 (package containerd,
// 1.6.20~ds1-1+deb12u3 in bookworm). It has the CRI plugin but does not
// implement GetContainerEvents (it answers codes.Unimplemented), so tests
// use it to exercise the fallback to relisting against a real runtime.
// Set Options.Legacy, or use RequireLegacy or StartLegacyForTests.
const (
	// LegacyPackage is the Debian package InstallLegacy installs.
	LegacyPackage = "containerd"
	// LegacyVersionPrefix is the containerd version the legacy runtime
	// must have (`containerd --version` prints e.g. 1.6.20~ds1).
	LegacyVersionPrefix = "1.6."
	// LegacyBinDir is where the package puts containerd, its shims and
	// ctr; it goes first on the legacy containerd's PATH so that it runs
	// its own containerd-shim-runc-v2 (1.6), not the cache's v2 shim.
	LegacyBinDir = "/usr/bin"
)

// InstallLegacy is Install for the legacy runtime: it makes sure Debian's
// containerd 1.6 is installed (with `apt-get install containerd` when
// LegacyBinDir/containerd is missing or not 1.6.x and running as root),
// finds runc and builds the test image. It does not install containerd
// ContainerdVersion. The package's service is never left running: the
// install runs with DEBIAN_FRONTEND=noninteractive, and any system
// containerd that appears during it is stopped.
func InstallLegacy(ctx context.Context, logf func(string, ...any)) (Binaries, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var b Binaries
	cache, err := CacheDir()
	if err != nil {
		return b, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return b, fmt.Errorf("containerdtest: create cache dir: %w", err)
	}
	unlock, err := lockFile(filepath.Join(cache, "containerdtest.lock"))
	if err != nil {
		return b, err
	}
	defer unlock()

	goBin, err := goTool()
	if err != nil {
		return b, err
	}
	b.Containerd = filepath.Join(LegacyBinDir, "containerd")
	b.Shim = filepath.Join(LegacyBinDir, "containerd-shim-runc-v2")
	b.Ctr = filepath.Join(LegacyBinDir, "ctr")
	if b.Version, err = ensureLegacyContainerd(ctx, b.Containerd, logf); err != nil {
		return b, err
	}
	for _, p := range []string{b.Shim, b.Ctr} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("containerdtest: containerd %s is installed but %v", b.Version, err)
		}
	}
	if b.Runc, err = findRunc(ctx, logf); err != nil {
		return b, err
	}
	if err := buildTestImage(ctx, goBin, cache, &b); err != nil {
		return b, err
	}
	return b, nil
}

// ensureLegacyContainerd installs Debian's containerd 1.6 unless path
// already is containerd 1.6.x, and returns its version.
func ensureLegacyContainerd(ctx context.Context, path string, logf func(string, ...any)) (string, error) {
	v, err := printedVersion(path)
	if err == nil && strings.HasPrefix(v, LegacyVersionPrefix) {
		return v, nil
	}
	why := fmt.Sprintf("%s is missing", path)
	if err == nil {
		why = fmt.Sprintf("%s is %s, not %sx", path, v, LegacyVersionPrefix)
	} else if !errors.Is(err, os.ErrNotExist) {
		why = err.Error()
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("containerdtest: %s; install Debian's containerd 1.6 (`apt-get install --no-install-recommends %s`) or run as root", why, LegacyPackage)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("containerdtest: %s and there is no apt-get to install Debian's containerd 1.6", why)
	}
	before := systemContainerds(path)
	logf("containerdtest: %s: running apt-get install -y --no-install-recommends %s", why, LegacyPackage)
	t0 := time.Now()
	install := func() ([]byte, error) {
		// --no-remove: never replace another containerd package (say
		// containerd.io) that conflicts with Debian's; fail instead.
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "--no-remove",
			"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold", LegacyPackage)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	out, err := install()
	if err != nil {
		// The package lists may be missing or stale.
		if upd, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
			out = append(out, upd...)
		} else {
			out, err = install()
		}
	}
	// Whatever happened, the package must not leave a system containerd
	// running: there is no systemd here, but elsewhere its postinst starts
	// containerd.service.
	stopErr := stopNewSystemContainerds(path, before, logf)
	if err != nil {
		return "", errors.Join(fmt.Errorf("containerdtest: %s and `apt-get install -y --no-install-recommends %s` failed: %v\n%s", why, LegacyPackage, err, tail(string(out), 20)), stopErr)
	}
	if stopErr != nil {
		return "", stopErr
	}
	v, err = printedVersion(path)
	if err != nil {
		return "", fmt.Errorf("containerdtest: after apt-get install %s: %w", LegacyPackage, err)
	}
	if !strings.HasPrefix(v, LegacyVersionPrefix) {
		return "", fmt.Errorf("containerdtest: after apt-get install %s, %s is %s, want %sx", LegacyPackage, path, v, LegacyVersionPrefix)
	}
	logf("containerdtest: installed containerd %s in %v", v, time.Since(t0).Round(time.Millisecond))
	return v, nil
}

// systemContainerds lists the running processes of the binary path that
// are not containerdtest instances (whose arguments name a directory
// <tmp>/pleg-ctd-*).
func systemContainerds(path string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != path {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(b), "/"+dirPrefix) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// stopNewSystemContainerds stops the system containerd processes of path
// that were not in before, i.e. that the package installation started:
// with systemctl when systemd runs, else SIGTERM then SIGKILL. It fails if
// one is still running afterwards.
func stopNewSystemContainerds(path string, before []int, logf func(string, ...any)) error {
	var started []int
	for _, pid := range systemContainerds(path) {
		if !slices.Contains(before, pid) {
			started = append(started, pid)
		}
	}
	if len(started) == 0 {
		return nil
	}
	logf("containerdtest: installing %s started a system containerd %v; stopping it", LegacyPackage, started)
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		if out, err := exec.Command("systemctl", "stop", "containerd.service").CombinedOutput(); err != nil {
			logf("containerdtest: systemctl stop containerd.service: %v %s", err, out)
		}
	}
	for _, pid := range started {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	if left := waitGone(started, 10*time.Second); len(left) > 0 {
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if left := waitGone(left, 5*time.Second); len(left) > 0 {
			return fmt.Errorf("containerdtest: the system containerd %v started by installing %s survived SIGKILL", left, LegacyPackage)
		}
	}
	return nil
}

// legacyConfigTOML is containerd 1.6's configuration (version 2) for an
// instance in dir; see docs/cri/config.md of containerd v1.6.20.
func legacyConfigTOML(dir, socket, runc string) string {
	q := strconv.Quote
	return fmt.Sprintf(`# Generated by github.com/plegkit/pleg/test/containerdtest (containerd 1.6).
version = 2
root = %[1]s
state = %[2]s
imports = []
# Plugins this machine kind cannot run or tests do not need.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]s

[ttrpc]
  address = %[4]s

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]s
    restrict_oom_score_adj = true
    disable_apparmor = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "native"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = %[6]s
          Root = %[7]s
    # No CNI: pods use the host network. Keep CNI lookups inside dir.
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[8]s
      conf_dir = %[9]s
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""

  [plugins."io.containerd.internal.v1.opt"]
    path = %[10]s
`,
		q(filepath.Join(dir, "root")), q(filepath.Join(dir, "state")), q(socket), q(socket+".ttrpc"),
		q(SandboxImage), q(runc), q(filepath.Join(dir, "runc")),
		q(filepath.Join(dir, "cni", "bin")), q(filepath.Join(dir, "cni", "net.d")), q(filepath.Join(dir, "opt")))
}
