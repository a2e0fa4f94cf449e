// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"time"

	"github.com/plegkit/pleg/kubeletpleg"
)

// FormatVersion is the version of the recording's JSON; a reader refuses
// a newer one rather than misread it.
const FormatVersion = 1

// Triggers, as recordings and pleg_recordings_total{trigger} name them.
const (
	// TriggerSlowRelist: the generator's global relist has been in flight
	// past the fraction of the health threshold.
	TriggerSlowRelist = "slow-relist"
	// TriggerSlowCall: a CRI call of pleg's (a list, or a pod's
	// inspection) has been in flight past that fraction.
	TriggerSlowCall = "slow-call"
	// TriggerUnhealthy: the health check fails.
	TriggerUnhealthy = "unhealthy"
	// TriggerStreamSilent: the container event stream is connected and
	// said nothing while the lists showed containers change.
	TriggerStreamSilent = "stream-silent"
	// TriggerCondition: the node condition pleg writes turned on.
	TriggerCondition = "node-condition"
	// TriggerStuckProcess: the runtime or one of its shims has been
	// stopped (T) or in uninterruptible sleep (D) on consecutive looks,
	// or an OCI runtime's command or a CNI plugin they run has lived past
	// StuckCommandAge.
	TriggerStuckProcess = "stuck-process"
	// TriggerManual: an operator asked for a recording.
	TriggerManual = "manual"
	// TriggerLive: not a recording but pleg doctor's live view of the
	// node, taken by the same probes and never written.
	TriggerLive = "live"
)

// Recording is what the recorder kept of one incident: one JSON file in
// the state directory.
type Recording struct {
	Version int `json:"version"`
	// Name is the file's name without its extension, e.g.
	// 20261126T212233.123Z-slow-call.
	Name string `json:"name"`
	// Trigger is the trigger that started the recording, Reason a line
	// about it.
	Trigger string `json:"trigger"`
	Reason  string `json:"reason"`
	// Onset is when the trigger fired; Started and Finished bound the
	// taking of the recording.
	Onset    time.Time `json:"onset"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Timeline is every trigger that fired in the incident until the
	// recording was taken, and each part's start and end.
	Timeline []TimelineEntry `json:"timeline"`
	// Parts are the probes taken, each bounded in time and size.
	Parts []Part `json:"parts"`

	Pleg      *PlegView     `json:"pleg,omitempty"`
	Runtime   *RuntimeState `json:"runtime,omitempty"`
	Processes *Processes    `json:"processes,omitempty"`
	Host      *Host         `json:"host,omitempty"`
	// Kubelet is the kubelet's own PLEG as its metrics told it, when pleg
	// was given a way to read them.
	Kubelet *kubeletpleg.Reading `json:"kubelet,omitempty"`
}

// TimelineEntry is one moment of the incident.
type TimelineEntry struct {
	At time.Time `json:"at"`
	// Kind is "trigger", "part-start" or "part-end".
	Kind string `json:"kind"`
	What string `json:"what"`
	// Detail is the trigger's reason, or how the part ended.
	Detail string `json:"detail,omitempty"`
}

// Part is how one probe of the recording went.
type Part struct {
	Name     string    `json:"name"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// TimedOut tells the probe did not end by its deadline: it was
	// abandoned and what it would have found is missing.
	TimedOut bool `json:"timedOut,omitempty"`
	// Skipped tells why the probe was not run (not configured, not
	// opted in).
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Truncated tells the probe's output was cut at its size cap.
	Truncated bool `json:"truncated,omitempty"`
}

// PlegView is what pleg itself saw: its CRI calls and its generator.
type PlegView struct {
	// InFlight are pleg's CRI calls without an answer yet, the oldest
	// first.
	InFlight []Call `json:"inFlight"`
	// Recent are the last calls that returned, the newest last.
	Recent []Call `json:"recent"`
	// Status is the generator's status.
	Status *GeneratorStatus `json:"status,omitempty"`
	// Stream is what the container event stream delivered.
	Stream StreamView `json:"stream"`
}

// Call is one CRI call of pleg's.
type Call struct {
	Op string `json:"op"`
	// ID is the sandbox or container asked about; for a list, empty for
	// the whole node's, pod=UID for one pod's.
	ID    string    `json:"id,omitempty"`
	Start time.Time `json:"start"`
	// Seconds is how long it took, or, in flight, its age at the
	// recording.
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// GeneratorStatus is the generator's status (pleg.Status) as recorded.
type GeneratorStatus struct {
	Mode                string       `json:"mode"`
	Evented             bool         `json:"evented"`
	StreamConnected     bool         `json:"streamConnected"`
	StreamSince         time.Time    `json:"streamSince,omitzero"`
	StreamError         string       `json:"streamError,omitempty"`
	NoStream            bool         `json:"noStream,omitempty"`
	RelistThreshold     float64      `json:"relistThresholdSeconds"`
	LastRelist          time.Time    `json:"lastRelist,omitzero"`
	RelistInFlightSince time.Time    `json:"relistInFlightSince,omitzero"`
	ListFailingSince    time.Time    `json:"listFailingSince,omitzero"`
	ListError           string       `json:"listError,omitempty"`
	FailingPods         []FailingPod `json:"failingPods,omitempty"`
	Healthy             bool         `json:"healthy"`
	HealthError         string       `json:"healthError,omitempty"`
}

// FailingPod is a pod whose inspection fails.
type FailingPod struct {
	UID       string    `json:"uid"`
	Name      string    `json:"name,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Since     time.Time `json:"since"`
	Deadline  bool      `json:"deadline,omitempty"`
	Error     string    `json:"error,omitempty"`
}

// StreamView is what the container event stream delivered, as seen from
// pleg's side of it.
type StreamView struct {
	Open        bool      `json:"open"`
	Events      uint64    `json:"events"`
	LastEventAt time.Time `json:"lastEventAt,omitzero"`
}

// RuntimeState is what the runtime says of itself.
type RuntimeState struct {
	Endpoint string `json:"endpoint,omitempty"`
	Name     string `json:"name,omitempty"`
	Version  string `json:"version,omitempty"`
	// Pid is the runtime's process, as found (0 if not), StartedAt its
	// start and UptimeSeconds its age at the recording.
	Pid           int       `json:"pid,omitempty"`
	StartedAt     time.Time `json:"startedAt,omitzero"`
	UptimeSeconds float64   `json:"uptimeSeconds,omitempty"`
	// Stacks are the runtime's goroutine stacks (containerd's debug
	// socket, or CRI-O's dump), cut at the size cap; StacksSource says
	// where they came from.
	Stacks       string `json:"stacks,omitempty"`
	StacksSource string `json:"stacksSource,omitempty"`
}

// Processes are the runtime's process, its shims and their children,
// and, in a recording or doctor's live view, the kubelet, docker's
// daemons, the OCI runtimes' commands and CNI plugins the runtime runs,
// and every process in D or T at both of the probe's looks.
type Processes struct {
	// FoundBy tells how the runtime's process was found: "socket" (the
	// owner of its socket), "command line" (a runtime's that names the
	// socket), "name", or "" when it was not.
	FoundBy string `json:"foundBy,omitempty"`
	// HostView tells the probe saw the host's processes (pid 2 is the
	// kernel's kthreadd): a process it did not find is not running. In
	// a pod without hostPID it sees the pod's own alone.
	HostView bool `json:"hostView,omitempty"`
	// WindowSeconds is the time between the probe's two looks.
	WindowSeconds float64   `json:"windowSeconds,omitempty"`
	List          []Process `json:"list"`
}

// Process is one process as /proc shows it.
type Process struct {
	Pid  int    `json:"pid"`
	PPid int    `json:"ppid"`
	Comm string `json:"comm"`
	// Role is what it is to the node's containers: RoleRuntime,
	// RoleEngine, RoleShim, RoleOCI, RoleCNI, RoleKubelet, RoleChild or
	// RoleOther.
	Role string `json:"role"`
	// State is the kernel's one-letter state: R, S, D, T, t, Z, I.
	State string `json:"state"`
	// WChan is the kernel function it sleeps in, if any and readable.
	WChan string `json:"wchan,omitempty"`
	// KernelStack is /proc/PID/stack, readable by root only.
	KernelStack string  `json:"kernelStack,omitempty"`
	CPUSeconds  float64 `json:"cpuSeconds"`
	RSSBytes    int64   `json:"rssBytes"`
	// Threads in D state, which a process in S may hide, and the wait
	// channels of those other than the main thread, with how many wait
	// in each.
	ThreadsD    int            `json:"threadsD,omitempty"`
	ThreadWaits map[string]int `json:"threadWaits,omitempty"`
	// TimedOut tells reading it did not end by its deadline.
	TimedOut bool `json:"timedOut,omitempty"`
	// StartedAt is when it started, AgeSeconds its age at the probe: an
	// OCI runtime's command or a CNI plugin lives for a fraction of a
	// second when all is well.
	StartedAt  time.Time `json:"startedAt,omitzero"`
	AgeSeconds float64   `json:"ageSeconds,omitempty"`
	// Held tells it was in the same state, D or T, at both of the
	// probe's looks: stuck, not passing through.
	Held bool `json:"held,omitempty"`
	// Args0 is the program an OCI runtime or CNI plugin was run as (its
	// argv[0]); Subcommand an OCI runtime's command (create, kill, exec,
	// init, ...).
	Args0      string `json:"args0,omitempty"`
	Subcommand string `json:"subcommand,omitempty"`
	// ID is what a shim or an OCI runtime's command is about: a
	// containerd shim's -id (its pod's sandbox), conmon's -c, runc's
	// container. Name is conmon's -n (k8s_CONTAINER_POD_NAMESPACE_UID_N),
	// or a CNI plugin's name.
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// Children is how many processes a shim has under it: none once its
	// containers are gone, when it should have exited too.
	Children int `json:"children,omitempty"`
	// CNICommand is a CNI plugin's CNI_COMMAND (ADD, DEL, CHECK, ...),
	// the one variable of its environment read.
	CNICommand string `json:"cniCommand,omitempty"`
	// Sched is what the scheduler did with its threads between the
	// probe's looks (the runtime, the kubelet, docker's daemons).
	Sched *Sched `json:"sched,omitempty"`
	// Cgroup is the cgroups it runs in, as they limit it (the same).
	Cgroup *Cgroup `json:"cgroup,omitempty"`
}

// Sched is a process's scheduling over a window: the CPU time its
// threads got and the time they waited, runnable, for a CPU
// (/proc/PID/task/*/schedstat). A process that waits about as long as it
// runs, or longer, is starved of CPU.
type Sched struct {
	WindowSeconds float64 `json:"windowSeconds"`
	RanSeconds    float64 `json:"ranSeconds"`
	WaitedSeconds float64 `json:"waitedSeconds"`
	Threads       int     `json:"threads"`
}

// Cgroup is what a process's cgroups allow it.
type Cgroup struct {
	// CPUPath is its cpu cgroup; CPUQuotaSeconds of CPU it may use every
	// CPUPeriodSeconds (both 0: no quota). CPUPeriods and CPUThrottled
	// count the periods since the cgroup was made and those in which the
	// quota ran out, CPUThrottledSeconds the time it was held back;
	// WindowPeriods and WindowThrottled the same between the probe's
	// looks.
	CPUPath             string  `json:"cpuPath,omitempty"`
	CPUQuotaSeconds     float64 `json:"cpuQuotaSeconds,omitempty"`
	CPUPeriodSeconds    float64 `json:"cpuPeriodSeconds,omitempty"`
	CPUPeriods          uint64  `json:"cpuPeriods,omitempty"`
	CPUThrottled        uint64  `json:"cpuThrottled,omitempty"`
	CPUThrottledSeconds float64 `json:"cpuThrottledSeconds,omitempty"`
	WindowPeriods       uint64  `json:"windowPeriods,omitempty"`
	WindowThrottled     uint64  `json:"windowThrottled,omitempty"`
	// PidsPath is its pids cgroup, with the PIDs (threads) in it and its
	// limit (0: none).
	PidsPath    string `json:"pidsPath,omitempty"`
	PidsCurrent int64  `json:"pidsCurrent,omitempty"`
	PidsMax     int64  `json:"pidsMax,omitempty"`
	// IOPath is its blkio (v1) or io (v2) cgroup, and IOLimits the
	// throttles set on it, as the files say them.
	IOPath   string   `json:"ioPath,omitempty"`
	IOLimits []string `json:"ioLimits,omitempty"`
}

// Host is the host's state.
type Host struct {
	// Pressure is /proc/pressure/{cpu,memory,io}; absent on kernels
	// without PSI, or with it off (PressureAbsent says so).
	Pressure       map[string]Pressure `json:"pressure,omitempty"`
	PressureAbsent bool                `json:"pressureAbsent,omitempty"`
	Load           [3]float64          `json:"load"`
	// Memory holds /proc/meminfo's MemTotal, MemAvailable, SwapTotal,
	// SwapFree, Dirty and Writeback, in bytes.
	Memory map[string]int64 `json:"memory,omitempty"`
	// HungMounts are the mounts whose statfs did not answer within the
	// deadline; MountsChecked how many were tried.
	HungMounts    []string `json:"hungMounts,omitempty"`
	MountsChecked int      `json:"mountsChecked"`
	// KernelLog are the kernel log's lines since shortly before the
	// onset that tell of hung tasks, OOM kills or I/O errors (opt-in).
	KernelLog []string `json:"kernelLog,omitempty"`
	// PIDs is the node's PID use.
	PIDs *PIDs `json:"pids,omitempty"`
	// OOMKills is /proc/vmstat's oom_kill: the OOM killer's kills since
	// boot.
	OOMKills int64 `json:"oomKills,omitempty"`
}

// PIDs is the node's PID use. Every thread takes a PID: fork and clone
// fail once the threads reach pid_max or threads-max, or a pids cgroup's
// limit, in the runtime, its shims, runc and the containers alike.
type PIDs struct {
	// Max is kernel.pid_max, ThreadsMax kernel.threads-max, InUse the
	// threads that exist.
	Max        int64 `json:"max"`
	ThreadsMax int64 `json:"threadsMax"`
	InUse      int64 `json:"inUse"`
	// Cgroups are the kubelet's pods' pids cgroups: kubepods, then the
	// pods nearest their limit or holding the most. The runtime's and the
	// kubelet's are with their processes.
	Cgroups []PidsCgroup `json:"cgroups,omitempty"`
}

// PidsCgroup is one pids cgroup: the PIDs in it and its limit (0: none).
type PidsCgroup struct {
	// Of is "kubepods", or "pod" with the pod's UID.
	Of      string `json:"of"`
	PodUID  string `json:"podUID,omitempty"`
	Path    string `json:"path"`
	Current int64  `json:"current"`
	Max     int64  `json:"max,omitempty"`
}

// Pressure is one resource's pressure stall information: the share of
// time, in percent, some (or all, full) tasks stalled on it.
type Pressure struct {
	SomeAvg10  float64 `json:"someAvg10"`
	SomeAvg60  float64 `json:"someAvg60"`
	SomeAvg300 float64 `json:"someAvg300"`
	FullAvg10  float64 `json:"fullAvg10"`
	FullAvg60  float64 `json:"fullAvg60"`
}
