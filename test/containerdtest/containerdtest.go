// Package containerdtest is the project's own harness for end-to-end tests
// against a real container runtime. It installs containerd (ContainerdVersion,
// with its runc shim and ctr) into the project cache, builds a tiny test
// image from test/testimg without docker, and runs a private containerd
// instance in a temporary directory with its own socket, root, state, runc
// root and configuration, so that tests never touch a system containerd.
// The issue asking for runtime tests allows "scripts under hack/ or an
// equivalent Go test harness"; this package is that harness, usable from
// `go test` alone.
//
// Requirements: Linux, root, runc (installed with apt-get when missing), and
// the Go module proxy the first time (to `go install` containerd). Pods use
// the host network because there is no CNI: see PodSpec.
//
// Typical use in a test:
//
//	inst := containerdtest.Require(t) // skips, or fails under CI=true, if unavailable
//	sb, err := inst.RunPod(ctx, containerdtest.PodSpec{UID: "u1", Name: "p", Namespace: "ns"})
//	... inst.Runtime is a raw CRI RuntimeServiceClient; inst.Endpoint its address.
//
// Instance.Stop stops everything it started: pod sandboxes (through CRI),
// containerd, any leftover shim and its containers, mounts and the directory.
//
// Options.Legacy (RequireLegacy, StartLegacyForTests) starts Debian's
// containerd 1.6 instead, installed with apt-get when missing (see
// InstallLegacy): a real CRI runtime without GetContainerEvents, on which
// an evented PLEG must fall back to relisting. The Instance API is the same.
package containerdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// ContainerdVersion is the containerd release the harness installs.
	ContainerdVersion = "v2.2.1"
	// SandboxImage is the pinned pod sandbox ("pause") image.
	SandboxImage = "pleg.test/pause:1"
	// TestImage is the image for test containers; see test/testimg for the
	// modes its arguments select. It is the same image as SandboxImage.
	TestImage = "pleg.test/testimg:1"

	// CRINamespace is the containerd namespace of CRI objects.
	CRINamespace = "k8s.io"

	readyTimeout = 60 * time.Second
	dirPrefix    = "pleg-ctd-"
)

// Options configure Start.
type Options struct {
	// Logf receives progress messages (e.g. t.Logf); nil discards them.
	Logf func(format string, args ...any)
	// KeepLogs keeps containerd's log: Stop copies it to
	// <os.TempDir()>/pleg-containerd-<pid>-<n>.log before removing the
	// instance directory, and logs where it is.
	KeepLogs bool
	// LogLevel is containerd's --log-level; default "info".
	LogLevel string
	// Legacy starts Debian's containerd 1.6 (see InstallLegacy) instead of
	// containerd ContainerdVersion. It has CRI but no GetContainerEvents.
	Legacy bool
}

// Instance is a private containerd. Its exported fields are read-only.
type Instance struct {
	// Endpoint is the CRI endpoint, "unix://<Dir>/c.sock".
	Endpoint string
	// Dir is the instance directory; everything containerd keeps is in it.
	Dir string
	// Runtime and Images are raw CRI clients on Endpoint. They survive
	// Kill and Restart (the connection reconnects).
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// Bin are the binaries in use.
	Bin Binaries
	// Version is containerd's version: ContainerdVersion, or for a Legacy
	// instance the Debian build's, e.g. "1.6.20~ds1".
	Version string
	// Legacy reports whether this is Debian's containerd 1.6.
	Legacy bool

	opts    Options
	socket  string
	config  string
	logPath string
	conn    *grpc.ClientConn

	mu      sync.Mutex
	proc    *process // the running containerd, nil after Kill or Stop
	sandbox map[string]bool
	stopped bool
	stopErr error
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait returned
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start installs what is needed (see Install, or InstallLegacy with
// opts.Legacy), starts a private containerd, waits until its CRI Status
// reports RuntimeReady, imports the test image and returns the instance. On
// error nothing is left behind.
func Start(ctx context.Context, opts Options) (*Instance, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("containerdtest: a private containerd needs root (run the tests as root)")
	}
	sweepStale(opts.Logf)
	install := Install
	if opts.Legacy {
		install = InstallLegacy
	}
	bin, err := install(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	in := &Instance{
		Dir:     dir,
		Bin:     bin,
		Version: bin.Version,
		Legacy:  opts.Legacy,
		opts:    opts,
		socket:  filepath.Join(dir, "c.sock"),
		config:  filepath.Join(dir, "config.toml"),
		logPath: filepath.Join(dir, "containerd.log"),
		sandbox: map[string]bool{},
	}
	in.Endpoint = "unix://" + in.socket
	if len(in.socket)+len(".ttrpc") >= 104 {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: socket path %q is too long; set TMPDIR to a shorter directory", in.socket)
	}
	// Record the owner so that a later Start can clean up after a test
	// process that died without calling Stop.
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	config := configTOML(dir, in.socket, bin.Runc)
	if opts.Legacy {
		config = legacyConfigTOML(dir, in.socket, bin.Runc)
	}
	if err := os.WriteFile(in.config, []byte(config), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	if err := writeNetworkConfig(filepath.Join(dir, "cni", "net.d")); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	in.conn, err = grpc.NewClient(in.Endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)),
	)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: grpc client: %w", err)
	}
	in.Runtime = runtimeapi.NewRuntimeServiceClient(in.conn)
	in.Images = runtimeapi.NewImageServiceClient(in.conn)

	t0 := time.Now()
	if err := in.start(ctx); err != nil {
		return nil, errors.Join(err, in.Stop())
	}
	if err := in.importImage(ctx); err != nil {
		return nil, errors.Join(err, in.Stop())
	}
	opts.Logf("containerdtest: containerd %s ready at %s in %v", in.Version, in.Endpoint, time.Since(t0).Round(time.Millisecond))
	return in, nil
}

// configTOML is containerd's configuration for an instance in dir.
func configTOML(dir, socket, runc string) string {
	q := strconv.Quote
	return fmt.Sprintf(`# Generated by github.com/plegkit/pleg/test/containerdtest.
version = 3
root = %[1]s
state = %[2]s
imports = []
# Plugins this machine kind cannot run or tests do not need.
disabled_plugins = [
  'io.containerd.snapshotter.v1.aufs',
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.erofs',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.differ.v1.erofs',
  'io.containerd.mount-handler.v1.erofs',
  'io.containerd.nri.v1.nri',
  'io.containerd.tracing.processor.v1.otlp',
  'io.containerd.internal.v1.tracing',
]

[grpc]
  address = %[3]s

[ttrpc]
  address = %[4]s

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'native'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[5]s
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = ''

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    disable_apparmor = true
    enable_cdi = false
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[6]s
          Root = %[7]s
    # Pods use the host network, so no CNI plugin ever runs; a network
    # configuration is there all the same, as on a node, so that the
    # runtime reports NetworkReady. CNI lookups stay inside dir.
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[8]s]
      conf_dir = %[9]s

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.internal.v1.opt']
    path = %[10]s

  [plugins.'io.containerd.transfer.v1.local']
    [[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
      platform = 'linux/%[11]s'
      snapshotter = 'native'
      differ = 'walking'
`,
		q(filepath.Join(dir, "root")), q(filepath.Join(dir, "state")), q(socket), q(socket+".ttrpc"),
		q(SandboxImage), q(runc), q(filepath.Join(dir, "runc")),
		q(filepath.Join(dir, "cni", "bin")), q(filepath.Join(dir, "cni", "net.d")), q(filepath.Join(dir, "opt")),
		runtime.GOARCH)
}

// networkConfig is a CNI network of the loopback plugin alone. It is
// never used, the test pods being on the host network, but its presence
// makes containerd report the pod network ready, as on a configured node.
const networkConfig = `{"cniVersion": "1.0.0", "name": "pleg-test", "plugins": [{"type": "loopback"}]}
`

func writeNetworkConfig(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-pleg-test.conflist"), []byte(networkConfig), 0o644)
}

// start starts containerd and waits until it is ready.
func (in *Instance) start(ctx context.Context) error {
	in.mu.Lock()
	if in.stopped {
		in.mu.Unlock()
		return errors.New("containerdtest: instance is stopped")
	}
	if in.proc != nil && !in.proc.exited() {
		in.mu.Unlock()
		return errors.New("containerdtest: containerd is already running")
	}
	logf, err := os.OpenFile(in.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		in.mu.Unlock()
		return fmt.Errorf("containerdtest: %w", err)
	}
	fmt.Fprintf(logf, "=== containerdtest: starting containerd at %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(in.Bin.Containerd,
		"--config", in.config,
		"--address", in.socket,
		"--root", filepath.Join(in.Dir, "root"),
		"--state", filepath.Join(in.Dir, "state"),
		"--log-level", in.opts.LogLevel)
	// The shim is found on PATH: our bin dir first (the cache's for
	// ContainerdVersion, LegacyBinDir for Legacy), then runc's.
	path := in.Bin.BinDir() + string(os.PathListSeparator) + filepath.Dir(in.Bin.Runc) + string(os.PathListSeparator) + os.Getenv("PATH")
	cmd.Env = append(envWithout(os.Environ(), "PATH", "CONTAINERD_ADDRESS", "CONTAINERD_NAMESPACE", "NOTIFY_SOCKET"), "PATH="+path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = in.Dir
	// Own process group: a ^C to `go test` must not reach containerd
	// before Stop does, and Stop decides the order of things.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	logf.Close()
	if err != nil {
		in.mu.Unlock()
		return fmt.Errorf("containerdtest: starting %s: %w", in.Bin.Containerd, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	in.proc = p
	in.mu.Unlock()
	return in.waitReady(ctx, p)
}

// waitReady polls the CRI Status RPC until RuntimeReady is true.
func (in *Instance) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	in.conn.ResetConnectBackoff()
	var last string
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := in.Runtime.Status(cctx, &runtimeapi.StatusRequest{})
		ccancel()
		if err == nil {
			for _, c := range resp.GetStatus().GetConditions() {
				if c.Type == runtimeapi.RuntimeReady {
					if c.Status {
						return nil
					}
					last = fmt.Sprintf("RuntimeReady is false: %s %s", c.Reason, c.Message)
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("containerdtest: containerd exited (%v) before it was ready; last status: %s; log tail:\n%s", p.cmd.ProcessState, last, in.LogTail(30))
		case <-ctx.Done():
			return fmt.Errorf("containerdtest: containerd not ready after %v: %s; log tail:\n%s", readyTimeout, last, in.LogTail(30))
		case <-time.After(100 * time.Millisecond):
			in.conn.ResetConnectBackoff()
		}
	}
}

// importImage imports the test image archive into the CRI namespace.
func (in *Instance) importImage(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, in.Bin.Ctr, "--address", in.socket, "--namespace", CRINamespace,
		"images", "import", "--snapshotter", "native", in.Bin.ImageTar)
	cmd.Env = envWithout(os.Environ(), "CONTAINERD_ADDRESS", "CONTAINERD_NAMESPACE", "CONTAINERD_SNAPSHOTTER")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("containerdtest: ctr images import %s failed: %v\n%s\ncontainerd log tail:\n%s", in.Bin.ImageTar, err, tail(string(out), 20), in.LogTail(20))
	}
	// The CRI image store follows containerd's image events; wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for _, ref := range []string{SandboxImage, TestImage} {
		for {
			resp, err := in.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			if err == nil && resp.GetImage() != nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("containerdtest: image %s not visible through CRI after import (err %v)", ref, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// Kill SIGKILLs containerd only, like a crash: shims and containers keep
// running. Restart brings containerd back.
func (in *Instance) Kill() error {
	in.mu.Lock()
	p := in.proc
	in.proc = nil
	in.mu.Unlock()
	if p == nil || p.exited() {
		return errors.New("containerdtest: containerd is not running")
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("containerdtest: kill containerd: %w", err)
	}
	<-p.done
	return nil
}

// Restart starts containerd again on the same directories and
// configuration, after Kill or after it died, and waits until it is ready.
func (in *Instance) Restart(ctx context.Context) error {
	t0 := time.Now()
	if err := in.start(ctx); err != nil {
		return err
	}
	in.opts.Logf("containerdtest: containerd restarted in %v", time.Since(t0).Round(time.Millisecond))
	return nil
}

// Running reports whether the containerd process is running.
func (in *Instance) Running() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.proc != nil && !in.proc.exited()
}

// Pid is the pid of the running containerd, or 0.
func (in *Instance) Pid() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.proc == nil || in.proc.exited() {
		return 0
	}
	return in.proc.cmd.Process.Pid
}

// LogTail returns the last n lines of containerd's log (all restarts).
func (in *Instance) LogTail(n int) string {
	b, err := os.ReadFile(in.logPath)
	if err != nil {
		return fmt.Sprintf("(no containerd log: %v)", err)
	}
	return tail(string(b), n)
}

// Stop cleanly stops the instance: it stops and removes every pod sandbox
// through CRI (which ends their shims), stops containerd (SIGTERM, then
// SIGKILL after 10 s), kills any remaining process whose command line refers
// to the instance directory together with its descendants (leftover shims
// and their containers), unmounts everything below the directory and removes
// it. Stop is idempotent: later calls return the first call's result.
func (in *Instance) Stop() error {
	in.mu.Lock()
	if in.stopped {
		err := in.stopErr
		in.mu.Unlock()
		return err
	}
	in.stopped = true
	p := in.proc
	in.proc = nil
	in.mu.Unlock()

	t0 := time.Now()
	var errs []error
	if p != nil && !p.exited() {
		errs = append(errs, in.removeAllPods())
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			in.opts.Logf("containerdtest: containerd did not exit 10s after SIGTERM, killing it")
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	if in.conn != nil {
		in.conn.Close()
	}
	if in.opts.KeepLogs {
		if b, err := os.ReadFile(in.logPath); err == nil {
			if f, err := os.CreateTemp("", fmt.Sprintf("pleg-containerd-%d-*.log", os.Getpid())); err == nil {
				f.Write(b)
				f.Close()
				in.opts.Logf("containerdtest: containerd log kept at %s", f.Name())
			}
		}
	}
	in.mu.Lock()
	ids := make([]string, 0, len(in.sandbox))
	for id := range in.sandbox {
		ids = append(ids, id)
	}
	in.mu.Unlock()
	errs = append(errs, cleanupDir(in.Dir, in.socket, ids, in.opts.Logf))
	err := errors.Join(errs...)
	if err != nil {
		err = fmt.Errorf("containerdtest: stop: %w", err)
	}
	in.opts.Logf("containerdtest: stopped in %v", time.Since(t0).Round(time.Millisecond))
	in.mu.Lock()
	in.stopErr = err
	in.mu.Unlock()
	return err
}

// removeAllPods stops and removes every pod sandbox containerd lists.
func (in *Instance) removeAllPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range resp.Items {
		in.trackSandbox(sb.Id)
		if _, err := in.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s: %w", sb.Id, err))
			continue
		}
		if _, err := in.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

func (in *Instance) trackSandbox(id string) {
	in.mu.Lock()
	in.sandbox[id] = true
	in.mu.Unlock()
}

func envWithout(env []string, names ...string) []string {
	out := env[:0:0]
outer:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}
