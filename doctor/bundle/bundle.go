// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package bundle writes the archive an operator attaches to a bug report
// for a runtime's maintainers when a node's PLEG is, or was, unhealthy:
// doctor's report, the incident's flight recordings, the runtime's and the
// kubelet's recent logs, a kernel log excerpt, the runtime's version and
// configuration and its lists, taken with deadlines, in one gzipped tar,
// as sonobuoy's and `kubectl cluster-info dump`'s archives are.
//
// Secrets are kept out by what is read, not by what is removed: the
// runtime's lists are copied field by field from an allow-list (no
// annotations, no labels but the kubelet's own, and no container status,
// which holds the environment); the runtime's configuration keeps the
// string values of an allow-list of keys only; nothing else of the host
// is read but the logs of two units and the kernel's. Logs are free text:
// their lines pass a list of credential shapes (RedactLine), the one
// deny-list, and every bundle's README says so. Every part has a deadline
// and a size cap, and the whole archive a bound.
package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	toml "github.com/pelletier/go-toml/v2"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/flightrec"
)

// Defaults of Config.
const (
	DefaultSince         = time.Hour
	DefaultMaxBytes      = 64 << 20
	DefaultCallTimeout   = 5 * time.Second
	DefaultMaxRecordings = 5
	// DefaultLogBytes caps each log, its newest lines kept.
	DefaultLogBytes = 8 << 20
	// DefaultLogLines caps the lines journalctl is asked for.
	DefaultLogLines = 20000
	// commandTimeout bounds journalctl.
	commandTimeout = 20 * time.Second
	// kernelLogBytes caps the kernel log excerpt.
	kernelLogBytes = 1 << 20
)

// Recordings is where the flight recordings are read: a flightrec.Store.
type Recordings interface {
	List() ([]flightrec.Entry, error)
	Read(name string) (*flightrec.Recording, error)
}

// Runner runs a command of the host (journalctl) and returns its standard
// output, at most limit bytes of it.
type Runner interface {
	LookPath(name string) (string, error)
	Run(ctx context.Context, limit int64, name string, args ...string) ([]byte, error)
}

// Config says what goes into a bundle.
type Config struct {
	// Node names the node, in the archive's top directory.
	Node string
	// Report is doctor's diagnosis, written as JSON and HTML; nil leaves it
	// out and says why in ReportError.
	Report      *doctor.Report
	ReportError string
	// Recordings are the flight recordings; nil reads none. Those whose
	// onset is within Since are the incident's: at most MaxRecordings,
	// the newest.
	Recordings    Recordings
	MaxRecordings int
	// CRI is the runtime; nil leaves its version and lists out. Each call
	// has CallTimeout.
	CRI         runtimeapi.RuntimeServiceClient
	CallTimeout time.Duration
	// Runtime is the runtime's name ("containerd", "cri-o"), for its
	// configuration and its unit's log; empty guesses it from Endpoint
	// and CRI Version.
	Runtime  string
	Endpoint string
	// Root is the host's root, where /etc and /var/log are read; default
	// "/". journalctl is used only with the root "/".
	Root string
	// Since is how far back logs go; default 1 h.
	Since time.Duration
	// MaxBytes bounds the archive's content, before compression; default
	// 64 MiB. A part that would pass it is cut, and the manifest says so.
	MaxBytes int64
	// LogBytes caps each log; default 8 MiB.
	LogBytes int64
	// Extra are more files, as they are: the daemon's health and metrics.
	Extra []File
	// Runner runs journalctl; default the host's.
	Runner Runner
	// Now is the time of the bundle; default time.Now.
	Now func() time.Time
}

// File is a file of the archive given by the caller.
type File struct {
	Name string
	Data []byte
}

// Entry is one file of the bundle as the manifest tells it.
type Entry struct {
	Name      string  `json:"name"`
	Source    string  `json:"source"`
	Bytes     int     `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	Truncated bool    `json:"truncated,omitempty"`
}

// Missing is a part that is not in the bundle, and why.
type Missing struct {
	Part string `json:"part"`
	Why  string `json:"why"`
}

// Manifest is the bundle's manifest.json: what it holds and what it could
// not take.
type Manifest struct {
	Node      string    `json:"node"`
	Created   time.Time `json:"created"`
	Since     time.Time `json:"logsSince"`
	Runtime   string    `json:"runtime,omitempty"`
	Endpoint  string    `json:"endpoint,omitempty"`
	Files     []Entry   `json:"files"`
	Missing   []Missing `json:"missing,omitempty"`
	Redaction []string  `json:"redaction"`
	MaxBytes  int64     `json:"maxBytes"`
}

func (c Config) withDefaults() Config {
	if c.MaxRecordings == 0 {
		c.MaxRecordings = DefaultMaxRecordings
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Root == "" {
		c.Root = "/"
	}
	if c.Since == 0 {
		c.Since = DefaultSince
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.LogBytes == 0 {
		c.LogBytes = DefaultLogBytes
	}
	if c.Runner == nil {
		c.Runner = HostRunner{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Node == "" {
		c.Node, _ = os.Hostname()
	}
	return c
}

// Validate reports a configuration Write refuses.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBytes < 0 || c.LogBytes < 0 || c.Since < 0 || c.CallTimeout < 0 || c.MaxRecordings < 0 {
		errs = append(errs, errors.New("bounds must not be negative"))
	}
	if c.Root != "" && !filepath.IsAbs(c.Root) {
		errs = append(errs, fmt.Errorf("root %q is not an absolute path", c.Root))
	}
	return errors.Join(errs...)
}

// writer is a bundle being written.
type writer struct {
	cfg   Config
	tw    *tar.Writer
	dir   string
	now   time.Time
	left  int64
	man   Manifest
	names map[string]bool
}

// Write writes the bundle to w as a gzipped tar, and returns its manifest.
// A part that fails or times out is left out and named in the manifest;
// only a failure to write w is an error.
func Write(ctx context.Context, w io.Writer, cfg Config) (*Manifest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	now := cfg.Now().UTC()
	gz := gzip.NewWriter(w)
	b := &writer{
		cfg: cfg, tw: tar.NewWriter(gz), now: now, left: cfg.MaxBytes, names: map[string]bool{},
		dir: "pleg-bundle-" + safeName(cfg.Node) + "-" + now.Format("20060102T150405Z"),
		man: Manifest{
			Node: cfg.Node, Created: now, Since: now.Add(-cfg.Since), Endpoint: cfg.Endpoint,
			MaxBytes: cfg.MaxBytes, Redaction: redactionRules,
		},
	}
	steps := []func(context.Context) error{
		b.report, b.recordings, b.runtime, b.config, b.logs, b.kernelLog, b.extra,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	if err := b.finish(); err != nil {
		return nil, err
	}
	if err := b.tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return &b.man, nil
}

// redactionRules are told in the manifest and the README.
var redactionRules = []string{
	"runtime lists: an allow-list of CRI fields; no annotations; labels: the kubelet's io.kubernetes.* only",
	"no container status is read: its environment, mounts and command never enter the bundle",
	"runtime configuration: string values kept only for an allow-list of keys (paths, names, types, images); " +
		"every other string, registry credentials and headers included, is " + Redacted,
	"logs (runtime, kubelet): lines pass a list of credential shapes (JSON web tokens, bearer and basic " +
		"authorization, a URL's user:password, env values, key=value of password/token/secret/auth/key), " +
		"replaced by " + Redacted + ": logs are free text, read them before you share the bundle publicly",
	"flight recordings hold the runtime's processes by command name (comm), never their command lines",
}

// safeName keeps a name to letters, digits, dots and dashes, for a path.
func safeName(s string) string {
	out := []rune(s)
	for i, r := range out {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
		default:
			out[i] = '_'
		}
	}
	if len(out) == 0 {
		return "node"
	}
	return string(out[:min(len(out), 63)])
}

// add writes one file, cut at what the archive's bound leaves.
func (b *writer) add(name, source string, data []byte, took time.Duration) error {
	if b.names[name] {
		return fmt.Errorf("bundle: %s twice", name)
	}
	b.names[name] = true
	e := Entry{Name: name, Source: source, Seconds: took.Seconds()}
	if int64(len(data)) > b.left {
		data = data[:max(b.left, 0)]
		e.Truncated = true
	}
	b.left -= int64(len(data))
	e.Bytes = len(data)
	hdr := &tar.Header{
		Name: path.Join(b.dir, name), Mode: 0o600, Size: int64(len(data)), ModTime: b.now, Typeflag: tar.TypeReg,
	}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := b.tw.Write(data); err != nil {
		return err
	}
	b.man.Files = append(b.man.Files, e)
	return nil
}

func (b *writer) missing(part, format string, args ...any) {
	b.man.Missing = append(b.man.Missing, Missing{Part: part, Why: fmt.Sprintf(format, args...)})
}

func (b *writer) report(context.Context) error {
	r := b.cfg.Report
	if r == nil {
		why := b.cfg.ReportError
		if why == "" {
			why = "no diagnosis was made"
		}
		b.missing("doctor", "%s", why)
		return nil
	}
	var j, h bytes.Buffer
	if err := render.JSON(&j, r); err != nil {
		b.missing("doctor/report.json", "%v", err)
	} else if err := b.add("doctor/report.json", "pleg doctor", j.Bytes(), 0); err != nil {
		return err
	}
	if err := render.HTML(&h, r); err != nil {
		b.missing("doctor/report.html", "%v", err)
		return nil
	}
	return b.add("doctor/report.html", "pleg doctor", h.Bytes(), 0)
}

func (b *writer) recordings(context.Context) error {
	if b.cfg.Recordings == nil {
		b.missing("recordings", "the flight recorder is off, or its state directory is not given")
		return nil
	}
	list, err := b.cfg.Recordings.List()
	if err != nil {
		b.missing("recordings", "listing: %v", err)
		return nil
	}
	since := b.now.Add(-b.cfg.Since)
	var mine []flightrec.Entry
	for _, e := range slices.Backward(list) {
		if e.Time.Before(since) || len(mine) == b.cfg.MaxRecordings {
			continue
		}
		mine = append(mine, e)
	}
	if len(mine) == 0 {
		b.missing("recordings", "none taken since %s (%d older)", since.Format(time.RFC3339), len(list))
		return nil
	}
	for _, e := range mine {
		rec, err := b.cfg.Recordings.Read(e.Name)
		if err != nil {
			b.missing("recordings/"+e.Name, "%v", err)
			continue
		}
		if err := b.addJSON("recordings/"+e.Name+".json", "flight recorder", rec, 0); err != nil {
			return err
		}
	}
	return nil
}

// call makes one CRI call within the call timeout, in a goroutine of its
// own, so that a runtime that ignores deadlines cannot hold the bundle.
func call[T any](ctx context.Context, timeout time.Duration, f func(context.Context) (T, error),
) (T, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, time.Since(start), r.err
	case <-ctx.Done():
		var zero T
		return zero, time.Since(start), fmt.Errorf("no answer within %v: %w", timeout, ctx.Err())
	}
}

func (b *writer) runtime(ctx context.Context) error {
	c := b.cfg.CRI
	if c == nil {
		b.missing("runtime", "no CRI endpoint to ask")
		return nil
	}
	to := b.cfg.CallTimeout
	v, took, err := call(ctx, to, func(ctx context.Context) (*runtimeapi.VersionResponse, error) {
		return c.Version(ctx, &runtimeapi.VersionRequest{})
	})
	if err != nil {
		b.missing("runtime/version.json", "CRI Version: %v", err)
	} else {
		if b.cfg.Runtime == "" {
			b.cfg.Runtime = v.GetRuntimeName()
		}
		if err := b.addJSON("runtime/version.json", "CRI Version", v, took); err != nil {
			return err
		}
	}
	// Status without verbose: the verbose info holds the whole
	// configuration, registry credentials included.
	s, took, err := call(ctx, to, func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return c.Status(ctx, &runtimeapi.StatusRequest{})
	})
	if err != nil {
		b.missing("runtime/status.json", "CRI Status: %v", err)
	} else if err := b.addJSON("runtime/status.json", "CRI Status", s.GetStatus(), took); err != nil {
		return err
	}
	sb, took, err := call(ctx, to, func(ctx context.Context) (*runtimeapi.ListPodSandboxResponse, error) {
		return c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	})
	if err != nil {
		b.missing("runtime/sandboxes.json", "CRI ListPodSandbox: %v", err)
	} else {
		out := make([]Sandbox, 0, len(sb.GetItems()))
		for _, s := range sb.GetItems() {
			out = append(out, sandboxOf(s))
		}
		if err := b.addJSON("runtime/sandboxes.json", "CRI ListPodSandbox", out, took); err != nil {
			return err
		}
	}
	cs, took, err := call(ctx, to, func(ctx context.Context) (*runtimeapi.ListContainersResponse, error) {
		return c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	})
	if err != nil {
		b.missing("runtime/containers.json", "CRI ListContainers: %v", err)
		return nil
	}
	out := make([]Container, 0, len(cs.GetContainers()))
	for _, c := range cs.GetContainers() {
		out = append(out, containerOf(c))
	}
	return b.addJSON("runtime/containers.json", "CRI ListContainers", out, took)
}

func (b *writer) addJSON(name, source string, v any, took time.Duration) error {
	data, err := marshal(v)
	if err != nil {
		b.missing(name, "%v", err)
		return nil
	}
	return b.add(name, source, data, took)
}

// marshal writes v as indented JSON, < and > as they are: the bundle is
// read by people, never served as a page.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// kind is the runtime's kind, "containerd", "crio" or "", from its name
// or its endpoint.
func (b *writer) kind() string {
	for _, s := range []string{b.cfg.Runtime, b.cfg.Endpoint} {
		s = strings.ToLower(s)
		switch {
		case strings.Contains(s, "crio"), strings.Contains(s, "cri-o"):
			return "crio"
		case strings.Contains(s, "containerd"):
			return "containerd"
		}
	}
	return ""
}

// configFiles are a runtime's configuration files, under the root.
func (b *writer) configFiles(kind string) []string {
	switch kind {
	case "containerd":
		return []string{"etc/containerd/config.toml"}
	case "crio":
		drop, _ := filepath.Glob(filepath.Join(b.cfg.Root, "etc/crio/crio.conf.d/*.conf"))
		files := []string{"etc/crio/crio.conf"}
		for _, d := range drop {
			rel, _ := filepath.Rel(b.cfg.Root, d)
			files = append(files, rel)
		}
		return files
	}
	return nil
}

func (b *writer) config(context.Context) error {
	kind := b.kind()
	if kind == "" {
		b.missing("runtime/config.json", "the runtime is neither containerd nor CRI-O by its name or endpoint")
		return nil
	}
	b.man.Runtime = kind
	out := map[string]any{}
	for _, f := range b.configFiles(kind) {
		data, err := readCapped(filepath.Join(b.cfg.Root, f), 1<<20)
		if err != nil {
			b.missing("runtime/config.json: /"+f, "%v", err)
			continue
		}
		var doc map[string]any
		if err := toml.Unmarshal(data, &doc); err != nil {
			// The error may quote the file: it is not kept.
			b.missing("runtime/config.json: /"+f, "not TOML the bundle can read")
			continue
		}
		out["/"+f] = redactConfig(doc)
	}
	if len(out) == 0 {
		return nil
	}
	return b.addJSON("runtime/config.json", "the runtime's configuration files, allow-listed", out, 0)
}

// readCapped reads at most limit bytes of a file, never through a
// device or a FIFO that could block.
func readCapped(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > limit {
		// The newest lines are the end's.
		if _, err := f.Seek(fi.Size()-limit, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// units are the journald units and log files of a runtime and the
// kubelet.
func (b *writer) units() []string {
	switch b.kind() {
	case "crio":
		return []string{"crio", "kubelet"}
	case "containerd":
		return []string{"containerd", "kubelet"}
	}
	return []string{"containerd", "crio", "kubelet"}
}

func (b *writer) logs(ctx context.Context) error {
	journal := ""
	if b.cfg.Root == "/" {
		journal, _ = b.cfg.Runner.LookPath("journalctl")
	}
	for _, unit := range b.units() {
		name := "logs/" + unit + ".log"
		start := time.Now()
		var data []byte
		var source string
		var err error
		if journal != "" {
			source = "journalctl -u " + unit
			data, err = b.journal(ctx, journal, "--unit="+unit+".service")
			if err == nil && len(bytes.TrimSpace(data)) == 0 {
				err = errors.New("the unit logged nothing in the window (no such unit?)")
			}
		} else {
			source = "/var/log/" + unit + ".log"
			data, err = readCapped(filepath.Join(b.cfg.Root, "var/log", unit+".log"), b.cfg.LogBytes)
			if errors.Is(err, os.ErrNotExist) {
				err = errors.New("no journalctl here, and no /var/log/" + unit + ".log")
			}
		}
		if err != nil {
			b.missing(name, "%s: %v", source, err)
			continue
		}
		if err := b.add(name, source, redactLog(data), time.Since(start)); err != nil {
			return err
		}
	}
	return nil
}

// journal asks journalctl for the window's lines of what args select.
func (b *writer) journal(ctx context.Context, journalctl string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	args = append([]string{"--no-pager", "--quiet", "--output=short-iso-precise",
		"--since=@" + fmt.Sprint(b.now.Add(-b.cfg.Since).Unix()), fmt.Sprintf("--lines=%d", DefaultLogLines)}, args...)
	return b.cfg.Runner.Run(ctx, b.cfg.LogBytes, journalctl, args...)
}

func (b *writer) kernelLog(ctx context.Context) error {
	name := "logs/kernel.log"
	start := time.Now()
	if b.cfg.Root == "/" {
		if j, err := b.cfg.Runner.LookPath("journalctl"); err == nil {
			data, err := b.journal(ctx, j, "--dmesg")
			if err == nil && len(bytes.TrimSpace(data)) > 0 {
				return b.add(name, "journalctl --dmesg", tail(data, kernelLogBytes), time.Since(start))
			}
		}
		data, err := ringBuffer()
		if err != nil {
			b.missing(name, "syslog(2): %v (CAP_SYSLOG is needed where kernel.dmesg_restrict=1)", err)
			return nil
		}
		return b.add(name, "syslog(2), the kernel's ring buffer", tail(data, kernelLogBytes), time.Since(start))
	}
	b.missing(name, "the kernel log is read on the host only (root /)")
	return nil
}

// tail keeps the last n bytes of data, from a line's start.
func tail(data []byte, n int) []byte {
	if len(data) <= n {
		return data
	}
	data = data[len(data)-n:]
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[i+1:]
	}
	return data
}

// ringBuffer reads the kernel's ring buffer with syslog(2).
func ringBuffer() ([]byte, error) {
	const sizeBuffer, readAll = 10, 3
	size, err := syscall.Klogctl(sizeBuffer, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, min(size, 16<<20))
	n, err := syscall.Klogctl(readAll, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func (b *writer) extra(context.Context) error {
	for _, f := range b.cfg.Extra {
		if err := b.add(f.Name, "pleg", f.Data, 0); err != nil {
			return err
		}
	}
	return nil
}

// finish writes the manifest and the README.
func (b *writer) finish() error {
	readme := b.readme()
	// The manifest and the README are written whatever the bound.
	b.left += int64(len(readme)) + 1<<20
	data, err := marshal(b.man)
	if err != nil {
		return err
	}
	if err := b.add("manifest.json", "pleg", data, 0); err != nil {
		return err
	}
	return b.add("README.txt", "pleg", []byte(readme), 0)
}

func (b *writer) readme() string {
	var s strings.Builder
	fmt.Fprintf(&s, "pleg support bundle of node %s, %s\n\n", b.cfg.Node, b.now.Format(time.RFC3339))
	s.WriteString("Attach it to a bug report of the runtime (containerd, CRI-O) or of pleg.\n\n")
	s.WriteString("Files (manifest.json has sources, sizes and timings):\n")
	for _, f := range b.man.Files {
		cut := ""
		if f.Truncated {
			cut = " (cut at the bundle's bound)"
		}
		fmt.Fprintf(&s, "  %-32s %s%s\n", f.Name, f.Source, cut)
	}
	if len(b.man.Missing) > 0 {
		s.WriteString("\nNot taken:\n")
		for _, m := range b.man.Missing {
			fmt.Fprintf(&s, "  %s: %s\n", m.Part, m.Why)
		}
	}
	s.WriteString("\nWhat is never in it, and how:\n")
	for _, r := range redactionRules {
		fmt.Fprintf(&s, "  - %s\n", r)
	}
	return s.String()
}

// HostRunner runs commands on this host.
type HostRunner struct{}

// LookPath finds a command on PATH.
func (HostRunner) LookPath(name string) (string, error) { return exec.LookPath(name) }

// Run runs a command with ctx's deadline, keeping at most limit bytes of
// its output: the newest, since logs end with the incident.
func (HostRunner) Run(ctx context.Context, limit int64, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	out := &tailBuffer{limit: int(limit)}
	cmd.Stdout = out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	return tail(out.buf, int(limit)), err
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	buf   []byte
	limit int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
	}
	return len(p), nil
}
