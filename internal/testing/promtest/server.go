// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is what a Server scrapes and evaluates.
type Config struct {
	// ScrapeInterval and EvaluationInterval default to a second, so that
	// a test sees series and alert states change within seconds.
	ScrapeInterval     time.Duration
	EvaluationInterval time.Duration
	ScrapeConfigs      []ScrapeConfig
	// RuleFiles are rule files' contents by file name.
	RuleFiles map[string][]byte
	// ExternalLabels are added to alerts (not to series within this
	// Prometheus, as in a real one).
	ExternalLabels map[string]string
}

// ScrapeConfig is a scrape job of static or discovered targets, the part
// of Prometheus' scrape_config that tests use.
type ScrapeConfig struct {
	JobName        string         `json:"job_name"`
	ScrapeInterval string         `json:"scrape_interval,omitempty"`
	ScrapeTimeout  string         `json:"scrape_timeout,omitempty"`
	MetricsPath    string         `json:"metrics_path,omitempty"`
	StaticConfigs  []StaticConfig `json:"static_configs,omitempty"`
	// KubernetesSDConfigs discover the targets from an API server.
	KubernetesSDConfigs []KubernetesSDConfig `json:"kubernetes_sd_configs,omitempty"`
	RelabelConfigs      []RelabelConfig      `json:"relabel_configs,omitempty"`
	// HonorLabels keeps the target's own job and instance labels.
	HonorLabels bool `json:"honor_labels,omitempty"`
	// ExtraScrapeMetrics adds scrape_body_size_bytes, scrape_timeout_seconds
	// and scrape_sample_limit to each scrape's own series.
	ExtraScrapeMetrics bool `json:"extra_scrape_metrics,omitempty"`
}

// StaticConfig is a group of targets with labels of their own. Labels
// starting with "__" (as "__meta_kubernetes_pod_node_name") are seen by
// relabelling only, as those that service discovery gives.
type StaticConfig struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// KubernetesSDConfig discovers targets of one role ("pod", "node", ...)
// from a Kubernetes API server, with a CA file and a bearer token.
type KubernetesSDConfig struct {
	APIServer     string                `json:"api_server"`
	Role          string                `json:"role"`
	Namespaces    *KubernetesNamespaces `json:"namespaces,omitempty"`
	TLSConfig     TLSConfig             `json:"tls_config"`
	Authorization Authorization         `json:"authorization"`
}

// KubernetesNamespaces limits discovery to these namespaces.
type KubernetesNamespaces struct {
	Names []string `json:"names"`
}

// TLSConfig is the CA that a client trusts.
type TLSConfig struct {
	CAFile string `json:"ca_file"`
}

// Authorization is a bearer token.
type Authorization struct {
	Credentials string `json:"credentials"`
}

// RelabelConfig is one relabelling step, in Prometheus' spelling.
type RelabelConfig struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    string   `json:"separator,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// Server is a running Prometheus, private to a test: its own port on
// loopback and its own storage in a temporary directory. Its methods are
// safe for concurrent use.
type Server struct {
	dir  string
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's, once done is closed
	hc   *http.Client
}

// startTries is how often Start tries another port when the one it chose
// was taken meanwhile by another process.
const startTries = 3

// readyTimeout bounds the wait for /-/ready: Prometheus replays an empty
// WAL and loads its rules, a second or two even on a busy machine.
const readyTimeout = 2 * time.Minute

// StartT starts a Prometheus for the test and stops it when the test
// ends; on failure it logs the tail of Prometheus' log first.
func StartT(t testing.TB, b Binaries, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	s, err := Start(ctx, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log tail:\n%s", s.LogTail(30))
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Start writes cfg and its rule files into a temporary directory, starts
// Prometheus on a free loopback port and waits until it is ready.
func Start(ctx context.Context, b Binaries, cfg Config) (*Server, error) {
	dir, err := os.MkdirTemp("", "promtest")
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	if err := writeConfig(dir, cfg); err != nil {
		_ = os.RemoveAll(dir) // cleanup after a failed start
		return nil, err
	}
	for try := 1; ; try++ {
		s, err := start(ctx, b, dir)
		if err == nil {
			return s, nil
		}
		logged := s.LogTail(10)
		_ = s.kill()
		if try == startTries || !strings.Contains(logged, "address already in use") {
			_ = os.RemoveAll(dir) // cleanup after a failed start
			return nil, fmt.Errorf("%w\n%s", err, logged)
		}
	}
}

func writeConfig(dir string, cfg Config) error {
	every := func(d time.Duration) string {
		if d == 0 {
			d = time.Second
		}
		return d.String()
	}
	var ruleFiles []string
	for name, content := range cfg.RuleFiles {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return fmt.Errorf("promtest: %w", err)
		}
		ruleFiles = append(ruleFiles, name)
	}
	scrapes := cfg.ScrapeConfigs
	if scrapes == nil {
		scrapes = []ScrapeConfig{}
	}
	doc := map[string]any{
		"global": map[string]any{
			"scrape_interval":     every(cfg.ScrapeInterval),
			"scrape_timeout":      every(cfg.ScrapeInterval),
			"evaluation_interval": every(cfg.EvaluationInterval),
			"external_labels":     cfg.ExternalLabels,
		},
		"rule_files":     ruleFiles,
		"scrape_configs": scrapes,
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("promtest: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "prometheus.yml"), data, 0o644)
}

// start starts Prometheus once, on a port that was free a moment ago. On
// error the returned Server, if any, holds the log; Stop it.
func start(ctx context.Context, b Binaries, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(b.Prometheus,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Should the test binary die, its Prometheus dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close() // the child holds its own descriptor
		return nil, fmt.Errorf("promtest: starting %s: %w", b.Prometheus, err)
	}
	s := &Server{
		dir:  dir,
		url:  "http://" + addr,
		cmd:  cmd,
		done: make(chan struct{}),
		hc:   &http.Client{Timeout: 10 * time.Second},
	}
	go func() {
		s.err = cmd.Wait()
		_ = logFile.Close()
		close(s.done)
	}()
	return s, s.waitReady(ctx)
}

// waitReady polls /-/ready until it answers 200, Prometheus exits or ctx
// ends.
func (s *Server) waitReady(ctx context.Context) error {
	var last error
	for {
		resp, err := s.hc.Get(s.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/-/ready: %s", resp.Status)
		}
		last = err
		select {
		case <-s.done:
			//nolint:errorlint // s.err is nil when it exited with status 0: %v says so, %w would not
			return fmt.Errorf("promtest: prometheus exited before it was ready: %v", s.err)
		case <-ctx.Done():
			return fmt.Errorf("promtest: prometheus not ready: %w (last: %w)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URL is the address of Prometheus' web API.
func (s *Server) URL() string { return s.url }

// Dir is the directory of its configuration, rule files and log.
func (s *Server) Dir() string { return s.dir }

// LogTail returns the last n lines of Prometheus' log.
func (s *Server) LogTail(n int) string {
	if s == nil {
		return ""
	}
	data, _ := os.ReadFile(filepath.Join(s.dir, "prometheus.log"))
	return tail(string(data), n)
}

// Stop stops Prometheus and removes its directory.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	return errors.Join(s.kill(), os.RemoveAll(s.dir))
}

// kill stops the process: SIGTERM, then SIGKILL after 20 s.
func (s *Server) kill() error {
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New("promtest: prometheus did not stop on SIGTERM within 20s; killed")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("promtest: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
