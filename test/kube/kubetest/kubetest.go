// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubetest starts a real Kubernetes API server for tests: etcd and
// kube-apiserver built from their Go modules (go.etcd.io/etcd/server/v3
// and k8s.io/kubernetes, at the versions this module's go.mod names as
// tools), run as processes of their own on loopback ports, with RBAC on,
// a token for an admin and service account tokens that the API server
// signs. The first start builds them, with the node's components, as one
// program (buildKube), which needs the Go module proxy and takes minutes;
// later starts reuse the build cache.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/plegkit/pleg/internal/testing/cachelock"
	"github.com/plegkit/pleg/internal/testing/freeport"
)

// apiServerPkg is one of the tools this module's go.mod names: they keep
// the requirements of the components that testdata/kube links.
const apiServerPkg = "k8s.io/kubernetes/cmd/kube-apiserver"

// AdminToken is the bearer token of an admin (group system:masters).
const AdminToken = "pleg-test-admin-token"

// Options change how StartWith runs the API server. The zero value is
// what Start runs: loopback, RBAC, the admin's token.
type Options struct {
	// Address is the IP address the API server binds to, advertises and
	// names in its serving certificate; default 127.0.0.1. A node whose
	// pods must reach it gives an address of the pod network's gateway.
	Address string
	// SANs are more IP addresses its serving certificate names, such as
	// the cluster IP of the kubernetes Service, which pods dial.
	SANs []net.IP
	// Tokens are more static tokens the API server accepts.
	Tokens []Token
	// Nodes makes it a cluster's API server with kubelets: the Node
	// authorizer before RBAC, the NodeRestriction admission plugin, and a
	// client certificate (KubeletClientCA signs it) for what it asks of
	// the kubelets (exec, logs).
	Nodes bool
}

// Token is a static bearer token and whom it authenticates.
type Token struct {
	Token, User string
	Groups      []string
}

// Server is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use.
type Server struct {
	dir       string
	bin       Binaries
	opts      Options
	etcdURL   string
	port      int
	caFile    string
	apiArgs   []string
	logf      func(string, ...any)
	mu        sync.Mutex
	etcd      *process
	apiServer *process
	// controllers are the processes StartControllers started.
	controllers []*process
}

// Binaries are the built etcd and kube-apiserver.
type Binaries struct {
	Etcd, APIServer string
}

// InCI reports whether CI=true: then a server that cannot start fails the
// test instead of skipping it.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends the test because the API server could not start:
// t.Fatalf under CI=true, t.Skipf otherwise.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("a real kube-apiserver is required under CI=true but could not start: %v", err)
	}
	t.Skipf("skipping, no kube-apiserver (set CI=true to make this a failure): %v", err)
}

// Build builds etcd and kube-apiserver (see buildKube) and returns their
// paths. Concurrent builds, also from other test processes, take turns
// through a lock file.
func Build(ctx context.Context, logf func(string, ...any)) (Binaries, error) {
	dir, err := buildKube(ctx, logf)
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{Etcd: filepath.Join(dir, "etcd"), APIServer: filepath.Join(dir, "kube-apiserver")}, nil
}

// kubeMain is the multi-call program of etcd and the Kubernetes
// components, in this module (under testdata: ./... leaves it out).
const kubeMain = "./kubetest/testdata/kube"

// components are the names the multi-call program answers to: each is a
// link to it in the cache's bin directory.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"}

// buildKube builds etcd and the Kubernetes components of the module's
// go.mod as one program, kube, into <cache>/kube/<release>/bin, the cache
// being $PLEG_CACHE_DIR, else ~/.cache/pleg, else the repository's .cache,
// and links each component's name to it there; it returns that
// directory. One program, linked once and stripped (-s -w: a test reads
// no DWARF), instead of six: the compile is the same, the links and the
// go command's loading of the package graph are done once, not six
// times. `go build` relinks nothing that is up to date.
func buildKube(ctx context.Context, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	mod, err := moduleDir()
	if err != nil {
		return "", err
	}
	// The runtime harness's rule (internal/testing/runtimetest.CacheDir, which this
	// module cannot import): the servers are built once per machine, not
	// once per clone.
	cache := os.Getenv("PLEG_CACHE_DIR")
	if cache == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(d, "pleg")
		} else {
			cache = filepath.Join(mod, "..", "..", ".cache")
		}
	}
	release, ldflags, err := versionFlags(mod)
	if err != nil {
		return "", err
	}
	binDir, err := filepath.Abs(filepath.Join(cache, "kube", release, "bin"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	unlock, err := cachelock.Acquire(filepath.Join(binDir, "..", "..", "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	out := filepath.Join(binDir, "kube")
	if _, err := os.Stat(out); err != nil {
		logf("kubetest: building etcd and Kubernetes %s (%s) as one program into %s, "+
			"once: about 15 CPU-minutes", release, strings.Join(components[1:], ", "), binDir)
	}
	start := time.Now()
	// Built as a plain `go build` builds them (the tests' -race is a flag
	// of theirs), so that the build cache serves every run.
	cmd := exec.CommandContext(ctx, goTool(), "build", "-ldflags", "-s -w "+ldflags, "-o", out, kubeMain)
	cmd.Dir = mod
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kubetest: go build %s in %s: %w\n%s", kubeMain, mod, err, tail(string(output), 20))
	}
	if d := time.Since(start); d > 10*time.Second {
		logf("kubetest: built etcd and Kubernetes %s in %v", release, d.Round(time.Second))
	}
	for _, name := range components {
		link := filepath.Join(binDir, name)
		if target, err := os.Readlink(link); err == nil && target == "kube" {
			continue
		}
		_ = os.Remove(link) // absent, or not the link: made anew below
		if err := os.Symlink("kube", link); err != nil {
			return "", fmt.Errorf("kubetest: %w", err)
		}
	}
	return binDir, nil
}

// versionFlags stamps the Kubernetes release of the module's go.mod into
// what it builds, as Kubernetes' own release builds do: without it an API
// server says it is v0.0.0-master+$Format:%H$, which fails a chart's
// kubeVersion, and a kubelet registers a node of no version.
func versionFlags(mod string) (release, ldflags string, err error) {
	data, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	if err != nil {
		return "", "", fmt.Errorf("kubetest: %w", err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v(\d+)\.(\d+)\.\d+)\b`).FindStringSubmatch(string(data))
	if m == nil {
		return "", "", fmt.Errorf("kubetest: %s/go.mod requires no k8s.io/kubernetes release", mod)
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X "+pkg+".gitVersion="+m[1],
			"-X "+pkg+".gitMajor="+m[2],
			"-X "+pkg+".gitMinor="+m[3],
			"-X "+pkg+".gitTreeState=clean")
	}
	return m[1], strings.Join(flags, " "), nil
}

// Start starts etcd and kube-apiserver in a temporary directory and waits
// until the API server is ready. Stop them with Stop.
func Start(ctx context.Context, logf func(string, ...any)) (*Server, error) {
	return StartWith(ctx, logf, Options{})
}

// StartWith is Start with opts.
func StartWith(ctx context.Context, logf func(string, ...any), opts Options) (*Server, error) {
	if opts.Address == "" {
		opts.Address = "127.0.0.1"
	}
	if net.ParseIP(opts.Address) == nil {
		return nil, fmt.Errorf("kubetest: address %q is not an IP address", opts.Address)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	bin, err := Build(ctx, logf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubetest")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	s := &Server{dir: dir, bin: bin, opts: opts, logf: logf}
	if err := s.start(ctx); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	clientPort, peerPort := ports[0], ports[1]
	s.port = ports[2]
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	s.etcd, err = startProcess(filepath.Join(s.dir, "etcd.log"), s.bin.Etcd,
		"--name=default",
		"--data-dir="+filepath.Join(s.dir, "etcd"),
		"--listen-client-urls="+s.etcdURL, "--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync", // a test's data need not survive a power cut
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, s.etcd, "etcd", func() error {
		resp, err := http.Get(s.etcdURL + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			return fmt.Errorf("etcd /health: %d %s", resp.StatusCode, body)
		}
		return nil
	}); err != nil {
		return err
	}

	files, err := writeSecrets(s.dir, s.opts)
	if err != nil {
		return err
	}
	s.caFile = files.ca
	authz := "RBAC"
	if s.opts.Nodes {
		authz = "Node,RBAC"
	}
	s.apiArgs = []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=" + s.opts.Address, "--advertise-address=" + s.opts.Address,
		"--secure-port=" + strconv.Itoa(s.port),
		"--tls-cert-file=" + files.cert, "--tls-private-key-file=" + files.key,
		"--cert-dir=" + filepath.Join(s.dir, "certs"),
		"--token-auth-file=" + files.tokens,
		"--anonymous-auth=false",
		"--authorization-mode=" + authz,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + files.saKey,
		"--service-account-signing-key-file=" + files.saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	if s.opts.Nodes {
		s.apiArgs = append(s.apiArgs,
			"--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+files.kubeletClientCert,
			"--kubelet-client-key="+files.kubeletClientKey,
			// The node's name need not resolve: dial its address.
			"--kubelet-preferred-address-types=InternalIP",
		)
	}
	return s.startAPIServer(ctx)
}

func (s *Server) startAPIServer(ctx context.Context) error {
	p, err := startProcess(filepath.Join(s.dir, "kube-apiserver.log"), s.bin.APIServer, s.apiArgs...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.apiServer = p
	s.mu.Unlock()
	hc, err := rest.HTTPClientFor(s.Config(AdminToken))
	if err != nil {
		return err
	}
	err = waitFor(ctx, p, "kube-apiserver", func() error {
		resp, err := hc.Get(s.URL() + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("/readyz: %d %s", resp.StatusCode, tail(string(body), 5))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w\nkube-apiserver log tail:\n%s", err, s.LogTail(20))
	}
	return nil
}

// URL is the API server's address.
func (s *Server) URL() string {
	return "https://" + net.JoinHostPort(s.opts.Address, strconv.Itoa(s.port))
}

// Port is the API server's port.
func (s *Server) Port() int { return s.port }

// Dir is the directory of the server's files and logs, removed by Stop.
func (s *Server) Dir() string { return s.dir }

// CAFile is the file of the CA that signed the API server's certificate.
func (s *Server) CAFile() string { return s.caFile }

// Config is a client configuration that authenticates with token.
func (s *Server) Config(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.caFile},
		Timeout:         30 * time.Second,
	}
}

// Client is an admin's client.
func (s *Server) Client() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(s.Config(AdminToken))
}

// WriteKubeconfig writes a kubeconfig that authenticates with token, as
// pleg run --kubeconfig reads it, and returns its path.
func (s *Server) WriteKubeconfig(name, token string) (string, error) {
	path := filepath.Join(s.dir, name+".kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: test
    cluster: {server: %q, certificate-authority: %q}
users:
  - name: %s
    user: {token: %q}
contexts:
  - name: test
    context: {cluster: test, user: %s}
current-context: test
`, s.URL(), s.caFile, name, token, name)
	return path, os.WriteFile(path, []byte(kubeconfig), 0o600)
}

// StopAPIServer stops kube-apiserver (SIGTERM), leaving etcd: the API
// server is down until StartAPIServer.
func (s *Server) StopAPIServer() error {
	s.mu.Lock()
	p := s.apiServer
	s.apiServer = nil
	s.mu.Unlock()
	if p == nil {
		return errors.New("kubetest: the API server is not running")
	}
	return p.stop()
}

// StartAPIServer starts kube-apiserver again, on the same port and data.
func (s *Server) StartAPIServer(ctx context.Context) error {
	return s.startAPIServer(ctx)
}

// Freeze stops kube-apiserver's process (SIGSTOP) without closing its
// port: connections open and requests go unanswered, as from an API
// server that is overloaded. Thaw resumes it.
func (s *Server) Freeze() error { return s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen kube-apiserver (SIGCONT).
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apiServer == nil {
		return errors.New("kubetest: the API server is not running")
	}
	return s.apiServer.cmd.Process.Signal(sig)
}

// LogTail returns the last n lines of kube-apiserver's log.
func (s *Server) LogTail(n int) string {
	data, _ := os.ReadFile(filepath.Join(s.dir, "kube-apiserver.log"))
	return tail(string(data), n)
}

// Stop stops both processes and removes their directory.
func (s *Server) Stop() error {
	var errs []error
	s.mu.Lock()
	api, etcd, controllers := s.apiServer, s.etcd, s.controllers
	s.apiServer, s.etcd, s.controllers = nil, nil, nil
	s.mu.Unlock()
	for _, p := range append(controllers, api, etcd) {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// process is a child process whose end is awaited once.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProcess(logPath, bin string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Should the test binary die, its servers die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close() // the child holds its own descriptor
		return nil, fmt.Errorf("kubetest: starting %s: %w", bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process: SIGCONT (it may be frozen) and SIGTERM, then
// SIGKILL after 20 s.
func (p *process) stop() error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("kubetest: %s did not stop on SIGTERM within 20s; killed", filepath.Base(p.cmd.Path))
	}
}

// waitFor polls ready until it succeeds, the process exits or ctx ends.
func waitFor(ctx context.Context, p *process, name string, ready func() error) error {
	var last error
	for {
		if last = ready(); last == nil {
			return nil
		}
		if p.exited() {
			//nolint:errorlint // p.err is nil when it exited with status 0: %v says so, %w would not
			return fmt.Errorf("kubetest: %s exited before it was ready: %v (see its log)", name, p.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s not ready: %w (last: %w)", name, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts returns n loopback ports that were free a moment ago, below
// the ephemeral range (an API server restarted for an outage takes its
// port back).
func freePorts(n int) ([]int, error) {
	return freeport.Pick(n)
}

// moduleDir is this module's directory: the first go.mod above the
// working directory (a test's is its package's).
func moduleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if !strings.Contains(string(data), "\n\t"+apiServerPkg+"\n") {
				return "", fmt.Errorf("kubetest: %s/go.mod names no tool %s: run the tests from test/kube", dir, apiServerPkg)
			}
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: no go.mod above the working directory")
		}
		dir = parent
	}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// BuildPleg builds the pleg command of the checkout at root (a path from
// the test's directory) into the test's directory, static, as the image's
// Dockerfile builds it, and returns its path.
func BuildPleg(t testing.TB, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pleg")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/pleg")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pleg: %v\n%s", err, out)
	}
	return bin
}
