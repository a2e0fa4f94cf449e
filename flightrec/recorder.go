// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/kubeletpleg"
)

// Defaults of Config.
const (
	DefaultFraction      = 1.0 / 3
	DefaultMinInterval   = 5 * time.Minute
	DefaultInterval      = time.Second
	DefaultStuckInterval = 5 * time.Second
	DefaultPartTimeout   = 5 * time.Second
	DefaultMaxPartBytes  = 4 << 20
	DefaultMaxCount      = 10
	DefaultMaxBytes      = 64 << 20
	DefaultSilentGrace   = 10 * time.Second
	// DefaultKernelLogLookback is how long before the onset the kernel
	// log is read from.
	DefaultKernelLogLookback = 2 * time.Minute
)

// Source is the generator as the recorder reads it; *pleg.Generator is
// one. Neither call waits for the runtime.
type Source interface {
	Status() pleg.Status
	Healthy() (bool, error)
}

// Versioner is a runtime that tells its name and version (CRI Version).
type Versioner interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
}

// Config configures a Recorder.
type Config struct {
	// Dir is where recordings are kept: the state directory's
	// recordings/. Required.
	Dir string
	// MaxCount and MaxBytes bound the recordings kept (DefaultMaxCount,
	// DefaultMaxBytes); the oldest go first.
	MaxCount int
	MaxBytes int64
	// Calls tracks pleg's CRI calls (the generator's runtime wrapped
	// with Calls.Wrap); Source is the generator. Both required.
	Calls  *Calls
	Source Source
	// Runtime tells the runtime's version, or is nil.
	Runtime Versioner
	// Endpoint is the runtime's endpoint, unix:///path: its socket's
	// owner is the runtime's process.
	Endpoint string
	// DebugSocket is containerd's debug socket ([debug] address), whose
	// pprof endpoint gives its goroutine stacks; "" for none.
	DebugSocket string
	// CRIOStacks asks CRI-O for its goroutine stacks with SIGUSR1
	// (opt-in: it signals the runtime).
	CRIOStacks bool
	// KernelLog reads the kernel log's lines of hung tasks, OOM kills and
	// I/O errors (opt-in: /dev/kmsg widens what the pod sees).
	KernelLog bool
	// Condition tells whether the node condition pleg writes is on; nil
	// when pleg writes none.
	Condition func() bool
	// Fraction of the health threshold past which a relist or a call in
	// flight triggers a recording (DefaultFraction).
	Fraction float64
	// MinInterval is the floor between two recordings
	// (DefaultMinInterval).
	MinInterval time.Duration
	// Interval is how often pleg's state is looked at (DefaultInterval);
	// StuckInterval how often the runtime's processes are
	// (DefaultStuckInterval); SilentGrace how long the lists may show a
	// change the stream has not told (DefaultSilentGrace).
	Interval      time.Duration
	StuckInterval time.Duration
	SilentGrace   time.Duration
	// PartTimeout bounds each part of a recording (DefaultPartTimeout),
	// MaxPartBytes the stacks and the kernel log (DefaultMaxPartBytes).
	PartTimeout  time.Duration
	MaxPartBytes int64
	// Proc is the /proc tree ("/proc"), Cgroup the cgroup file systems
	// ("/sys/fs/cgroup"), KmsgPath the kernel log ("/dev/kmsg") and
	// Statfs the mounts' stat (RealStatfs): tests give their own.
	Proc     string
	Cgroup   string
	KmsgPath string
	Statfs   Statfs
	// Kubelet, if set, reads the kubelet's own PLEG into each recording.
	Kubelet kubeletpleg.Source
	// Now is the clock (time.Now).
	Now func() time.Time
	// OnRecording, if set, is told of each recording written, for the
	// daemon's log and node event.
	OnRecording func(rec *Recording, path string)
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Fraction <= 0 {
		c.Fraction = DefaultFraction
	}
	def(&c.MinInterval, DefaultMinInterval)
	def(&c.Interval, DefaultInterval)
	def(&c.StuckInterval, DefaultStuckInterval)
	def(&c.SilentGrace, DefaultSilentGrace)
	def(&c.PartTimeout, DefaultPartTimeout)
	if c.MaxPartBytes <= 0 {
		c.MaxPartBytes = DefaultMaxPartBytes
	}
	if c.MaxCount <= 0 {
		c.MaxCount = DefaultMaxCount
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Recorder watches pleg and the runtime's processes and takes a recording
// at the onset of an incident.
type Recorder struct {
	cfg   Config
	store Store
	// node probes the runtime's processes and the host, as pleg doctor's
	// live view does.
	node *NodeProbe

	taken   *prometheus.CounterVec
	dropped *prometheus.CounterVec

	mu    sync.Mutex
	state triggerState
	// suspects are the processes in D or T at the last look: stuck
	// when still so at the next.
	suspects  map[int]string
	lastStuck time.Time
	stuck     []Process
	// recording serialises the taking of recordings.
	recording sync.Mutex
}

// New returns a recorder; it makes its directory, root-only.
func New(cfg Config) (*Recorder, error) {
	if cfg.Dir == "" {
		return nil, errors.New("flight recorder: no directory")
	}
	if cfg.Calls == nil || cfg.Source == nil {
		return nil, errors.New("flight recorder: no calls tracker or generator")
	}
	cfg = cfg.withDefaults()
	if cfg.Fraction > 1 {
		return nil, fmt.Errorf("flight recorder: fraction %g of the threshold must be at most 1", cfg.Fraction)
	}
	r := &Recorder{
		cfg:   cfg,
		store: Store{Dir: cfg.Dir, MaxCount: cfg.MaxCount, MaxBytes: cfg.MaxBytes},
		node: NewNodeProbe(NodeConfig{Endpoint: cfg.Endpoint, Proc: cfg.Proc, Cgroup: cfg.Cgroup, KmsgPath: cfg.KmsgPath,
			Statfs: cfg.Statfs, KernelLog: cfg.KernelLog, Kubelet: cfg.Kubelet, PartTimeout: cfg.PartTimeout,
			MaxPartBytes: cfg.MaxPartBytes, Now: cfg.Now}),
		suspects: map[int]string{},
		state:    triggerState{fraction: cfg.Fraction, silentGrace: cfg.SilentGrace, floor: cfg.MinInterval},
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_recordings_total",
			Help: "Flight recordings taken, by the trigger that started them.",
		}, []string{"trigger"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pleg_recordings_dropped_total",
			Help: "Flight recordings dropped: the oldest past the bounds (bounds), or one that could not be written (error).",
		}, []string{"reason"}),
	}
	if err := r.store.Open(); err != nil {
		return nil, fmt.Errorf("flight recorder: %w", err)
	}
	if cfg.Registerer != nil {
		if err := errors.Join(cfg.Registerer.Register(r.taken), cfg.Registerer.Register(r.dropped)); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// socketPath is the path of a unix endpoint, or "".
func socketPath(endpoint string) string {
	if strings.HasPrefix(endpoint, "/") {
		return filepath.Clean(endpoint)
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" {
		return ""
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	if p == "" {
		return ""
	}
	return filepath.Clean(p)
}

// Store returns the recorder's store, for reading back.
func (r *Recorder) Store() *Store { return &r.store }

// Run looks at pleg every Interval, and at the runtime's processes every
// StuckInterval, until ctx ends, taking a recording when a trigger fires.
// A recording is taken in the background: the looks go on meanwhile.
func (r *Recorder) Run(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if rec, trig, timeline := r.check(); rec {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = r.Take(ctx, trig.kind, trig.reason, timeline) // logged and counted by Take
			}()
		}
	}
}

// check takes one look and tells whether to record, on which trigger,
// with the incident's timeline so far.
func (r *Recorder) check() (bool, firing, []TimelineEntry) {
	now := r.cfg.Now()
	o := r.observe(now)
	r.mu.Lock()
	defer r.mu.Unlock()
	ok, trig := r.state.step(o)
	return ok, trig, append([]TimelineEntry(nil), r.state.timeline...)
}

func (r *Recorder) observe(now time.Time) observation {
	st := r.cfg.Source.Status()
	ok, err := r.cfg.Source.Healthy()
	o := observation{now: now, threshold: st.RelistThreshold, healthy: ok, relistInFlightSince: st.RelistInFlightSince}
	if o.threshold <= 0 {
		o.threshold = pleg.DefaultRelistThreshold
	}
	if err != nil {
		o.healthErr = err.Error()
	}
	if calls := r.cfg.Calls.InFlight(now); len(calls) > 0 {
		o.oldest = &calls[0]
	}
	if st.StreamConnected {
		o.unexplained = r.cfg.Calls.Unexplained()
	}
	if r.cfg.Condition != nil {
		o.conditionOn = r.cfg.Condition()
	}
	o.stuck = r.lookStuck(now)
	return o
}

// lookStuck reads the runtime's and its shims' states every
// StuckInterval and returns those in D or T at two looks in a row.
func (r *Recorder) lookStuck(now time.Time) []Process {
	r.mu.Lock()
	if !r.lastStuck.IsZero() && now.Sub(r.lastStuck) < r.cfg.StuckInterval {
		defer r.mu.Unlock()
		return r.stuck
	}
	r.lastStuck = now
	r.mu.Unlock()
	procs, err := r.node.scan(context.Background(), false)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		return nil
	}
	next := map[int]string{}
	var stuck []Process
	for _, p := range procs.List {
		if p.Role == RoleOCI || p.Role == RoleCNI {
			// Kept by the scan only past StuckCommandAge: stuck at once.
			stuck = append(stuck, p)
			continue
		}
		if p.State == "D" || p.State == "T" || p.State == "t" {
			next[p.Pid] = p.State
			if r.suspects[p.Pid] == p.State {
				stuck = append(stuck, p)
			}
		}
	}
	r.suspects, r.stuck = next, stuck
	return stuck
}
