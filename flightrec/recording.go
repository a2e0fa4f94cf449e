// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import "time"

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
	// stopped (T) or in uninterruptible sleep (D) on consecutive looks.
	TriggerStuckProcess = "stuck-process"
	// TriggerManual: an operator asked for a recording.
	TriggerManual = "manual"
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

// Processes are the runtime's process, its shims and their children.
type Processes struct {
	// FoundBy tells how the runtime's process was found: "socket" (the
	// owner of its socket), "name", or "" when it was not.
	FoundBy string    `json:"foundBy,omitempty"`
	List    []Process `json:"list"`
}

// Process is one process as /proc shows it.
type Process struct {
	Pid  int    `json:"pid"`
	PPid int    `json:"ppid"`
	Comm string `json:"comm"`
	// Role is "runtime", "shim" or "child".
	Role string `json:"role"`
	// State is the kernel's one-letter state: R, S, D, T, t, Z, I.
	State string `json:"state"`
	// WChan is the kernel function it sleeps in, if any and readable.
	WChan string `json:"wchan,omitempty"`
	// KernelStack is /proc/PID/stack, readable by root only.
	KernelStack string  `json:"kernelStack,omitempty"`
	CPUSeconds  float64 `json:"cpuSeconds"`
	RSSBytes    int64   `json:"rssBytes"`
	// Threads in D state, which a process in S may hide.
	ThreadsD int `json:"threadsD,omitempty"`
	// TimedOut tells reading it did not end by its deadline.
	TimedOut bool `json:"timedOut,omitempty"`
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
