// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/plegkit/pleg/kubeletpleg"
)

// Part names of the node's probes.
const (
	// PartKubelet reads the kubelet's own PLEG from its metrics.
	PartKubelet = "kubelet-pleg"
)

// DefaultWindow is the time between a node probe's two looks at the
// processes: long enough that a process passing through D is not taken
// for a stuck one and that a starved process's wait for a CPU shows,
// short enough for an operator waiting on pleg doctor.
const DefaultWindow = time.Second

// NodeConfig configures a NodeProbe.
type NodeConfig struct {
	// Endpoint is the runtime's endpoint, unix:///path: its socket's
	// owner is the runtime's process.
	Endpoint string
	// Proc is the /proc tree ("/proc"), Cgroup the cgroup file systems
	// ("/sys/fs/cgroup"), KmsgPath the kernel log ("/dev/kmsg") and
	// Statfs the mounts' stat (RealStatfs): tests give their own.
	Proc     string
	Cgroup   string
	KmsgPath string
	Statfs   Statfs
	// KernelLog reads the kernel log's lines of hung tasks, OOM kills and
	// I/O errors, since KernelLogLookback (DefaultKernelLogLookback)
	// before the onset.
	KernelLog         bool
	KernelLogLookback time.Duration
	// Kubelet, if set, reads the kubelet's own PLEG.
	Kubelet kubeletpleg.Source
	// PartTimeout bounds each part (DefaultPartTimeout), MaxPartBytes the
	// kernel log (DefaultMaxPartBytes).
	PartTimeout  time.Duration
	MaxPartBytes int64
	// Window is the time between the two looks at the processes
	// (DefaultWindow); it must be well within PartTimeout.
	Window time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

func (c NodeConfig) withDefaults() NodeConfig {
	if c.Proc == "" {
		c.Proc = "/proc"
	}
	if c.Cgroup == "" {
		c.Cgroup = "/sys/fs/cgroup"
	}
	if c.KmsgPath == "" {
		c.KmsgPath = "/dev/kmsg"
	}
	if c.Statfs == nil {
		c.Statfs = RealStatfs
	}
	if c.KernelLogLookback <= 0 {
		c.KernelLogLookback = DefaultKernelLogLookback
	}
	if c.PartTimeout <= 0 {
		c.PartTimeout = DefaultPartTimeout
	}
	if c.MaxPartBytes <= 0 {
		c.MaxPartBytes = DefaultMaxPartBytes
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	c.Window = min(c.Window, c.PartTimeout/4)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// NodeProbe reads the node below the runtime: the runtime's processes,
// its shims and what they run, the kubelet, the host's pressure, memory,
// PIDs, mounts and kernel log, and the kubelet's own PLEG. One serves the
// flight recorder, which writes what it reads at the onset of an
// incident, and pleg doctor, which judges it live: the same probes, and
// the same findings drawn from them. Every part runs in a goroutine of
// its own under its deadline and is abandoned, marked timed out, when it
// does not answer; nothing it does signals or changes anything.
type NodeProbe struct {
	cfg      NodeConfig
	proc     Proc
	cgroup   cgroupFS
	socket   string
	mounts   *mountProber
	cmdlines *cmdlineCache

	mu         sync.Mutex
	runtimePid int
	foundBy    string
}

// NewNodeProbe returns a probe of the node.
func NewNodeProbe(cfg NodeConfig) *NodeProbe {
	cfg = cfg.withDefaults()
	return &NodeProbe{
		cfg:      cfg,
		proc:     Proc{Root: cfg.Proc},
		cgroup:   cgroupFS{root: cfg.Cgroup},
		socket:   socketPath(cfg.Endpoint),
		mounts:   newMountProber(cfg.Statfs),
		cmdlines: newCmdlineCache(),
	}
}

// Snapshot reads the node now, as a recording that is not written: pleg
// doctor's live view. Its trigger is TriggerLive; it has no pleg part
// and no runtime stacks, which are the daemon's to keep.
func (n *NodeProbe) Snapshot(ctx context.Context) *Recording {
	now := n.cfg.Now()
	rec := &Recording{Version: FormatVersion, Name: "live", Trigger: TriggerLive,
		Reason: "pleg doctor's live view of the node", Onset: now, Started: now}
	p := n.probe(ctx, now)
	rec.Parts = p.parts()
	rec.Runtime = &RuntimeState{Endpoint: n.cfg.Endpoint}
	n.assemble(rec, p)
	rec.Finished = n.cfg.Now()
	return rec
}

// nodeProbed is what the node's parts found, each with how it went.
type nodeProbed struct {
	procs                        *Processes
	host                         *Host
	hung                         []string
	checked                      int
	klog                         []string
	kubelet                      *kubeletpleg.Reading
	pProc, pHost, pMnt, pLog, pK Part
}

func (p *nodeProbed) parts() []Part { return []Part{p.pProc, p.pHost, p.pMnt, p.pLog, p.pK} }

// probe runs the node's parts at once, each in a goroutine of its own
// under its deadline, and returns when each has ended or been abandoned.
func (n *NodeProbe) probe(ctx context.Context, onset time.Time) *nodeProbed {
	now, timeout := n.cfg.Now, n.cfg.PartTimeout
	var (
		wg sync.WaitGroup
		p  nodeProbed
	)
	wg.Go(func() {
		p.procs, p.pProc = runPart(ctx, PartProcesses, timeout, now, func(ctx context.Context) (*Processes, partResult) {
			procs, err := n.scan(ctx, true)
			return procs, partResult{err: err}
		})
	})
	wg.Go(func() {
		p.host, p.pHost = runPart(ctx, PartHost, timeout, now, func(context.Context) (*Host, partResult) {
			h := n.proc.hostState()
			h.PIDs = n.proc.pidsState(n.cgroup)
			h.OOMKills = n.proc.oomKills()
			return h, partResult{}
		})
	})
	wg.Go(func() {
		var m mounts
		m, p.pMnt = runPart(ctx, PartMounts, timeout, now, func(context.Context) (mounts, partResult) {
			mps, prefix, err := n.proc.mountPoints()
			if err != nil {
				return mounts{}, partResult{err: err}
			}
			// The stats' deadline is within the part's, so that the
			// mounts that did not answer are told, not lost.
			return mounts{n.mounts.probe(mps, prefix, timeout/2), len(mps)}, partResult{}
		})
		p.hung, p.checked = m.hung, m.checked
	})
	wg.Go(func() {
		p.klog, p.pLog = runPart(ctx, PartKernelLog, timeout, now, func(context.Context) ([]string, partResult) {
			if !n.cfg.KernelLog {
				return nil, partResult{skipped: "not asked for (pleg run --flight-recorder-kernel-log, pleg doctor " +
					"--kernel-log)"}
			}
			lines, err := kernelLog(n.cfg.KmsgPath, n.usecSinceBoot(onset.Add(-n.cfg.KernelLogLookback)),
				n.cfg.MaxPartBytes)
			return lines, partResult{err: err}
		})
	})
	wg.Go(func() {
		p.kubelet, p.pK = runPart(ctx, PartKubelet, timeout, now, func(ctx context.Context) (*kubeletpleg.Reading,
			partResult,
		) {
			if n.cfg.Kubelet == nil {
				return nil, partResult{skipped: "no way to read the kubelet's metrics was given"}
			}
			rd := n.cfg.Kubelet.Read(ctx)
			return &rd, partResult{}
		})
	})
	wg.Wait()
	return &p
}

// scan reads the runtime's processes: a full scan for a recording or a
// live view, or the runtime and its shims alone for the recorder's
// looks. It keeps the runtime's process for the next.
func (n *NodeProbe) scan(ctx context.Context, full bool) (*Processes, error) {
	n.mu.Lock()
	hint, foundBy := n.runtimePid, n.foundBy
	n.mu.Unlock()
	o := scanOptions{socket: n.socket, runtimePid: hint, foundBy: foundBy, cmdlines: n.cmdlines, full: full,
		cgroup: n.cgroup, now: n.cfg.Now, perProcess: 200 * time.Millisecond}
	if full {
		o.window, o.perProcess = n.cfg.Window, n.cfg.PartTimeout/4
	}
	procs, err := n.proc.scan(ctx, o)
	if err != nil {
		return nil, err
	}
	if pid := procs.pidOf(RoleRuntime); pid != 0 {
		n.mu.Lock()
		n.runtimePid, n.foundBy = pid, procs.FoundBy
		n.mu.Unlock()
	}
	return procs, nil
}

// runtimePID is the runtime's process as last found, 0 if none.
func (n *NodeProbe) runtimePID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runtimePid
}

// assemble puts what the node's parts found into rec: the processes, the
// host with its mounts and kernel log, the kubelet's PLEG, and the
// runtime's process and age into rec.Runtime, which must be set.
func (n *NodeProbe) assemble(rec *Recording, p *nodeProbed) {
	rec.Processes, rec.Kubelet = p.procs, p.kubelet
	if p.procs != nil {
		for _, pr := range p.procs.List {
			if pr.Role == RoleRuntime {
				rec.Runtime.Pid, rec.Runtime.StartedAt = pr.Pid, pr.StartedAt
				if !pr.StartedAt.IsZero() {
					rec.Runtime.UptimeSeconds = rec.Started.Sub(pr.StartedAt).Seconds()
				}
			}
		}
	}
	host := p.host
	if host == nil {
		host = &Host{} // the part timed out: the mounts and the kernel log are still worth keeping
	}
	host.HungMounts, host.MountsChecked, host.KernelLog = p.hung, p.checked, p.klog
	rec.Host = host
	for _, part := range rec.Parts {
		rec.Timeline = append(rec.Timeline,
			TimelineEntry{At: part.Started, Kind: "part-start", What: part.Name},
			TimelineEntry{At: part.Finished, Kind: "part-end", What: part.Name, Detail: partOutcome(part)})
	}
	slices.SortStableFunc(rec.Timeline, func(a, b TimelineEntry) int { return a.At.Compare(b.At) })
}

// usecSinceBoot is t in the kernel log's clock, microseconds since boot.
func (n *NodeProbe) usecSinceBoot(t time.Time) uint64 {
	boot, err := n.proc.bootTime()
	if err != nil || t.Before(boot) {
		return 0
	}
	return uint64(t.Sub(boot).Microseconds())
}

// oomKills is /proc/vmstat's oom_kill, 0 where the kernel has none.
func (p Proc) oomKills() int64 {
	b, err := readCapped(p.path("vmstat"), 64<<10)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
