// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package runtimetest is the project's own harness for end-to-end tests
// against real CRI runtimes: containerd at any version and CRI-O. It
// installs each runtime into the project cache (built from its Go module,
// once), builds a tiny test image from test/testimg without docker, and
// runs a private instance in a temporary directory with its own socket,
// root, state and configuration, so that tests never touch a system
// runtime. Everything is driven from `go test`.
//
// A Spec names a runtime and version: containerd v1.7.x and v2.x (see
// InstallContainerd), Debian's containerd 1.6 (DebianContainerd16, a CRI
// runtime without GetContainerEvents), and CRI-O (see InstallCRIO), with
// pod events on or off. Matrix reads the specs a test run covers from the
// environment.
//
// Requirements: Linux, root, runc (and for CRI-O conmon and skopeo),
// installed with apt-get when missing; the Go module proxy and a C
// compiler the first time a runtime is built. Pods use the host network
// because there is no CNI plugin: see PodSpec.
//
// Typical use in a test:
//
//	inst := runtimetest.Require(t, spec) // skips, or fails under CI=true, if unavailable
//	sb, err := inst.RunPod(ctx, runtimetest.PodSpec{UID: "u1", Name: "p", Namespace: "ns"})
//	... inst.Runtime is a raw CRI RuntimeServiceClient; inst.Endpoint its address.
//
// Instance.Stop stops everything it started: pod sandboxes (through CRI),
// the runtime, any leftover shim or conmon and its containers, mounts,
// cgroups and the directory.
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
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// SandboxImage is the pinned pod sandbox ("pause") image.
	SandboxImage = "pleg.test/pause:1"
	// TestImage is the image for test containers; see test/testimg for the
	// modes its arguments select. It is the same image as SandboxImage.
	TestImage = "pleg.test/testimg:1"

	readyTimeout = 60 * time.Second
	dirPrefix    = "pleg-ctd-"
)

// Options configure Start.
type Options struct {
	// Logf receives progress messages (e.g. t.Logf); nil discards them.
	Logf func(format string, args ...any)
	// KeepLogs keeps the runtime's log: Stop copies it to
	// <os.TempDir()>/pleg-<spec>-<pid>-<n>.log before removing the
	// instance directory, and logs where it is.
	KeepLogs bool
	// LogLevel is the runtime's log level; default "info".
	LogLevel string
	// PodNetwork, if set, is a CNI network configuration list (JSON) that
	// replaces the loopback-only one, run with the standard CNI plugins
	// of the host (Debian's containernetworking-plugins, installed when
	// missing): pods off the host network get an address on it, as under
	// a kubelet. containerd 2.x only.
	PodNetwork string
	// CNIBinDir, with PodNetwork, is the directory the runtime runs the
	// CNI plugins from instead of the host's: a test's wrappers of them.
	CNIBinDir string
}

// Instance is a private runtime. Its exported fields are read-only.
type Instance struct {
	// Spec is what was asked for.
	Spec Spec
	// Endpoint is the CRI endpoint, "unix://<Dir>/c.sock".
	Endpoint string
	// Dir is the instance directory; everything the runtime keeps is in it.
	Dir string
	// Runtime and Images are raw CRI clients on Endpoint. They survive
	// Kill and Restart (the connection reconnects).
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// Bin are the binaries in use.
	Bin Binaries
	// Version is the runtime's version as its binary tells it: "v2.4.2",
	// "v1.36.3", or for Debian's containerd e.g. "1.6.20~ds1".
	Version string

	flavor  flavor
	opts    Options
	socket  string
	logPath string
	conn    *grpc.ClientConn
	cniBin  string // the CNI plugins' directory: the system's with PodNetwork

	mu      sync.Mutex
	proc    *process // the running runtime, nil after Kill or Stop
	sandbox map[string]bool
	stopped bool
	stopErr error
}

// flavor is what differs between runtimes: how they are installed,
// configured, started and given the test image.
type flavor interface {
	install(ctx context.Context, logf func(string, ...any)) (Binaries, error)
	// configure writes the runtime's configuration into in.Dir.
	configure(in *Instance) error
	// command is the runtime's command line.
	command(in *Instance) []string
	// env is the environment the runtime runs with, on top of the test's
	// less what would point it elsewhere: PATH (its shims first), and
	// what keeps it to its own files.
	env(in *Instance) []string
	importImages(ctx context.Context, in *Instance) error
}

func (s Spec) flavor() flavor {
	if s.Kind == CRIO {
		return crio{s}
	}
	return containerd{s}
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

// Start installs what spec needs, starts a private instance of it, waits
// until its CRI Status reports RuntimeReady, imports the test image and
// returns the instance. On error nothing is left behind.
func Start(ctx context.Context, spec Spec, opts Options) (*Instance, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("runtimetest: a private %s needs root (run the tests as root)", spec)
	}
	sweepStale(opts.Logf)
	fl := spec.flavor()
	bin, err := fl.install(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("runtimetest: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		_ = os.RemoveAll(dir) // cleanup after a failed start
		return nil, fmt.Errorf("runtimetest: %w", err)
	}
	in := &Instance{
		Spec:    spec,
		Dir:     dir,
		Bin:     bin,
		Version: bin.Version,
		flavor:  fl,
		opts:    opts,
		socket:  filepath.Join(dir, "c.sock"),
		logPath: filepath.Join(dir, "runtime.log"),
		sandbox: map[string]bool{},
	}
	in.Endpoint = "unix://" + in.socket
	if in.cniBin, err = cniBinDir(ctx, spec, opts, dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if len(in.socket)+len(".ttrpc") >= 104 {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("runtimetest: socket path %q is too long; set TMPDIR to a shorter directory", in.socket)
	}
	// Record the owner so that a later Start can clean up after a test
	// process that died without calling Stop.
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("runtimetest: %w", err)
	}
	if err := fl.configure(in); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("runtimetest: configuring %s: %w", spec, err)
	}
	in.conn, err = grpc.NewClient(in.Endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
	)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("runtimetest: grpc client: %w", err)
	}
	in.Runtime = runtimeapi.NewRuntimeServiceClient(in.conn)
	in.Images = runtimeapi.NewImageServiceClient(in.conn)

	t0 := time.Now()
	if err := in.start(ctx); err != nil {
		return nil, errors.Join(err, in.Stop())
	}
	if err := fl.importImages(ctx, in); err != nil {
		return nil, errors.Join(err, in.Stop())
	}
	if err := in.waitImages(ctx); err != nil {
		return nil, errors.Join(err, in.Stop())
	}
	opts.Logf("runtimetest: %s (%s) ready at %s in %v",
		spec, in.Version, in.Endpoint, time.Since(t0).Round(time.Millisecond))
	return in, nil
}

// cniBinDir is where the instance in dir finds its CNI plugins: the
// system's with a pod network, else a directory of its own that stays
// empty.
func cniBinDir(ctx context.Context, spec Spec, opts Options, dir string) (string, error) {
	if opts.PodNetwork == "" {
		return filepath.Join(dir, "cni", "bin"), nil
	}
	if spec.Kind != Containerd || !strings.HasPrefix(spec.Version, "v2.") {
		return "", fmt.Errorf("runtimetest: a pod network needs containerd 2.x, not %s", spec)
	}
	if opts.CNIBinDir != "" {
		return opts.CNIBinDir, nil
	}
	return CNIPlugins(ctx, opts.Logf)
}

// start starts the runtime and waits until it is ready.
func (in *Instance) start(ctx context.Context) error {
	in.mu.Lock()
	if in.stopped {
		in.mu.Unlock()
		return errors.New("runtimetest: instance is stopped")
	}
	if in.proc != nil && !in.proc.exited() {
		in.mu.Unlock()
		return fmt.Errorf("runtimetest: %s is already running", in.Spec)
	}
	logf, err := os.OpenFile(in.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		in.mu.Unlock()
		return fmt.Errorf("runtimetest: %w", err)
	}
	// A header in the runtime's log; its own lines follow, or the start fails.
	_, _ = fmt.Fprintf(logf, "=== runtimetest: starting %s at %s\n", in.Spec, time.Now().Format(time.RFC3339Nano))
	args := in.flavor.command(in)
	cmd := exec.Command(args[0], args[1:]...)
	unset := []string{"PATH", "CONTAINERD_ADDRESS", "CONTAINERD_NAMESPACE", "NOTIFY_SOCKET", "CONTAINER_RUNTIME_ENDPOINT"}
	cmd.Env = append(envWithout(os.Environ(), unset...), in.flavor.env(in)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = in.Dir
	// Own process group: a ^C to `go test` must not reach the runtime
	// before Stop does, and Stop decides the order of things.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = logf.Close() // the runtime holds its own descriptor
	if err != nil {
		in.mu.Unlock()
		return fmt.Errorf("runtimetest: starting %s: %w", args[0], err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }() // how it ended is in its log
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
			return fmt.Errorf(
				"runtimetest: %s exited (%v) before it was ready; last status: %s; log tail:\n%s",
				in.Spec,
				p.cmd.ProcessState,
				last,
				in.LogTail(30),
			)
		case <-ctx.Done():
			return fmt.Errorf(
				"runtimetest: %s not ready after %v: %s; log tail:\n%s",
				in.Spec,
				readyTimeout,
				last,
				in.LogTail(30),
			)
		case <-time.After(100 * time.Millisecond):
			in.conn.ResetConnectBackoff()
		}
	}
}

// waitImages waits until the CRI image service shows the test images
// (containerd's follows its image events, a moment after the import).
func (in *Instance) waitImages(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for _, ref := range []string{SandboxImage, TestImage} {
		for {
			resp, err := in.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			if err == nil && resp.GetImage() != nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("runtimetest: image %s not visible through CRI after import (err %w)", ref, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// Kill SIGKILLs the runtime only, like a crash: shims (containerd) or
// conmon (CRI-O) and the containers keep running. Restart brings the
// runtime back.
func (in *Instance) Kill() error {
	in.mu.Lock()
	p := in.proc
	in.proc = nil
	in.mu.Unlock()
	if p == nil || p.exited() {
		return fmt.Errorf("runtimetest: %s is not running", in.Spec)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("runtimetest: kill %s: %w", in.Spec, err)
	}
	<-p.done
	return nil
}

// Restart starts the runtime again on the same directories and
// configuration, after Kill or after it died, and waits until it is ready.
func (in *Instance) Restart(ctx context.Context) error {
	t0 := time.Now()
	if err := in.start(ctx); err != nil {
		return err
	}
	in.opts.Logf("runtimetest: %s restarted in %v", in.Spec, time.Since(t0).Round(time.Millisecond))
	return nil
}

// Running reports whether the runtime process is running.
func (in *Instance) Running() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.proc != nil && !in.proc.exited()
}

// Pid is the pid of the running runtime, or 0.
func (in *Instance) Pid() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.proc == nil || in.proc.exited() {
		return 0
	}
	return in.proc.cmd.Process.Pid
}

// LogTail returns the last n lines of the runtime's log (all restarts).
func (in *Instance) LogTail(n int) string {
	b, err := os.ReadFile(in.logPath)
	if err != nil {
		return fmt.Sprintf("(no runtime log: %v)", err)
	}
	return tail(string(b), n)
}

// Stop cleanly stops the instance: it stops and removes every pod sandbox
// through CRI (which ends their shims or conmons), stops the runtime
// (SIGTERM, then SIGKILL after 10 s), kills any remaining process whose
// command line refers to the instance directory together with its
// descendants (leftover shims, conmons and their containers) and every
// process in its cgroups, unmounts everything below the directory and
// removes it. Stop is idempotent: later calls return the first call's
// result.
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
		_ = p.cmd.Process.Signal(syscall.SIGTERM) // exited already is as good
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			in.opts.Logf("runtimetest: %s did not exit 10s after SIGTERM, killing it", in.Spec)
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	if in.conn != nil {
		_ = in.conn.Close()
	}
	if in.opts.KeepLogs {
		if b, err := os.ReadFile(in.logPath); err == nil {
			if f, err := os.CreateTemp("", fmt.Sprintf("pleg-%s-%d-*.log", in.Spec, os.Getpid())); err == nil {
				_, werr := f.Write(b)
				if err := errors.Join(werr, f.Close()); err != nil {
					in.opts.Logf("runtimetest: %s log not kept: %v", in.Spec, err)
				} else {
					in.opts.Logf("runtimetest: %s log kept at %s", in.Spec, f.Name())
				}
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
		err = fmt.Errorf("runtimetest: stop %s: %w", in.Spec, err)
	}
	in.opts.Logf("runtimetest: %s stopped in %v", in.Spec, time.Since(t0).Round(time.Millisecond))
	in.mu.Lock()
	in.stopErr = err
	in.mu.Unlock()
	return err
}

// removeAllPods stops and removes every pod sandbox the runtime lists,
// several at a time: tests leave tens of pods behind.
func (in *Instance) removeAllPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := in.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	for _, sb := range resp.Items {
		in.trackSandbox(sb.Id)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var err error
			_, err = in.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id})
			if err != nil {
				err = fmt.Errorf("stop pod sandbox %s: %w", sb.Id, err)
			} else if _, err = in.Runtime.RemovePodSandbox(ctx,
				&runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				err = fmt.Errorf("remove pod sandbox %s: %w", sb.Id, err)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
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
