// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Defaults of Options and Churn.
const (
	// DefaultTick is the churn period: changes are applied in ticks so that a
	// seed gives one sequence of changes whatever the speed of the machine.
	DefaultTick = 100 * time.Millisecond
	// DefaultNamespace holds the simulated workload's pods.
	DefaultNamespace = "sim"
	// DefaultHistoryLimit bounds History: the oldest changes are forgotten
	// past it, so a long-running simulator does not grow without bound.
	DefaultHistoryLimit = 200_000
)

// Options configure a Sim. The zero value is a valid, empty runtime that
// serves nothing until Socket is set.
type Options struct {
	// Socket is the unix socket path to serve on.
	Socket string
	// Pods is the number of pods running when the simulator starts, each
	// with one ready sandbox and Containers running containers.
	Pods int
	// Containers is the number of containers per pod, at start and in the
	// pods that replace deleted ones.
	Containers int
	// Exited is the number of exited containers each initial pod starts
	// with besides its running ones: earlier attempts of its containers
	// that crashed and were never collected, spread over its container
	// names, as on a node whose crash-looping pods piled them up.
	Exited int
	// Churn sets the rates of spontaneous changes; zero means none.
	Churn Churn
	// Latency is the per-operation latency model; the zero value answers at
	// once. See LatencyPreset.
	Latency LatencyModel
	// Seed selects the workload: IDs, names and every churn decision. The
	// same seed and the same number of Step calls give the same History.
	Seed uint64
	// Events selects the GetContainerEvents semantics; default containerd's.
	Events EventMode
	// Faults are the faults active from the start; see SetFaults.
	Faults Faults
	// SandboxContainerStatuses makes PodSandboxStatus answers carry a
	// Timestamp and the statuses of the sandbox's containers, as CRI-O's
	// do with pod events on; containerd sends neither (2.0.0 to 2.0.2 sent
	// the timestamp alone).
	SandboxContainerStatuses bool
	// GC collects exited containers the way the kubelet's container garbage
	// collector does, keeping the newest exited container per pod and
	// container name. Off, exited containers accumulate until their pod is
	// removed, as on a node whose kubelet is not collecting.
	GC bool
	// HistoryLimit is how many changes History keeps; default
	// DefaultHistoryLimit, negative keeps none.
	HistoryLimit int
	// CgroupDriver is the cgroup driver RuntimeConfig reports, "systemd"
	// (the default, as containerd and CRI-O ship) or "cgroupfs". A kubelet
	// from 1.34 takes the runtime's answer over its own cgroupDriver, so a
	// kubelet on a machine without systemd needs "cgroupfs" here.
	CgroupDriver string
	// ImageFsMountpoint is the mount point ImageFsInfo reports; default
	// /var/lib/pleg-sim/images. A kubelet reads the filesystem there for
	// its eviction manager, so on a real kubelet's machine it must exist.
	ImageFsMountpoint string
	// LogRoot, when set, is prefixed to the log paths ReopenContainerLog
	// creates (under /var/log/pods, as the kubelet asks): tests keep them
	// out of the host's directory. Empty, they are where the kubelet
	// looks for them.
	LogRoot string
	// Registry is the content of the simulated registry images are pulled
	// from; nil makes every reference an image of its own. See Registry.
	Registry Registry
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock drives churn ticks, timestamps, latency, stream drops, the
	// restart downtime and the event backlog's expiry; default the real
	// clock. With a fake clock, latency sleeps last until it is stepped.
	Clock clock.WithTicker
}

// Churn gives the rates of spontaneous runtime changes, in events per
// second over the whole node; 0 means none. Changes are applied once per
// Tick, the number of each kind drawn from a Poisson distribution with
// mean rate × Tick.
type Churn struct {
	// Crashes: a running container exits with a non-zero code (reason
	// "Error") and a new attempt, its restart count one higher, is created
	// and started 1 to 3 ticks later.
	Crashes float64
	// CleanExits: a running container exits with code 0 (reason
	// "Completed") and is not restarted.
	CleanExits float64
	// PodReplacements: a pod's containers and sandbox are stopped, and one
	// tick later removed and a new pod created in its place.
	PodReplacements float64
	// ShortLived: a container is created and started in a running pod,
	// exits 1 to 3 ticks later and is removed the tick after: within 400 ms
	// at the default tick, so a relist every second usually misses it.
	ShortLived float64
	// Tick is the churn period; default DefaultTick.
	Tick time.Duration
}

// IsZero reports whether c makes no changes.
func (c Churn) IsZero() bool {
	return c.Crashes == 0 && c.CleanExits == 0 && c.PodReplacements == 0 && c.ShortLived == 0
}

// churnRate returns the field of c that ParseChurn's key (or an alias)
// sets, or nil.
func churnRate(c *Churn, key string) *float64 {
	switch key {
	case "crash", "crashes":
		return &c.Crashes
	case "exit", "exits":
		return &c.CleanExits
	case "pods", "replace":
		return &c.PodReplacements
	case "short":
		return &c.ShortLived
	}
	return nil
}

// ParseChurn parses the --churn flag: comma-separated KEY=VALUE pairs,
// rates in events per second over the node:
//
//	crash=R    containers crash and restart (alias crashes)
//	exit=R     containers exit cleanly (alias exits)
//	pods=R     pods are deleted and replaced (alias replace)
//	short=R    short-lived containers come and go
//	tick=D     the churn period, a Go duration (default 100ms)
//
// For example "crash=2,exit=0.5,pods=0.1,short=1". The empty string means
// no churn.
func ParseChurn(s string) (Churn, error) {
	var c Churn
	s = strings.TrimSpace(s)
	if s == "" {
		return c, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return Churn{}, fmt.Errorf("churn %q: want KEY=VALUE, got %q", s, item)
		}
		key = strings.ToLower(strings.TrimSpace(key))
		value = strings.TrimSpace(value)
		if key == "tick" {
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return Churn{}, fmt.Errorf("churn %q: tick %q must be a positive duration", s, value)
			}
			c.Tick = d
			continue
		}
		field := churnRate(&c, key)
		if field == nil {
			return Churn{}, fmt.Errorf("churn %q: unknown key %q (want crash, exit, pods, short or tick)", s, key)
		}
		rate, err := strconv.ParseFloat(value, 64)
		if err != nil || !finiteNonNegative(rate) {
			return Churn{}, fmt.Errorf("churn %q: %s rate %q must be a finite non-negative number", s, key, value)
		}
		*field = rate
	}
	return c, nil
}

// String formats c in ParseChurn's syntax.
func (c Churn) String() string {
	var parts []string
	add := func(key string, v float64) {
		if v != 0 {
			parts = append(parts, key+"="+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	add("crash", c.Crashes)
	add("exit", c.CleanExits)
	add("pods", c.PodReplacements)
	add("short", c.ShortLived)
	if c.Tick != 0 {
		parts = append(parts, "tick="+c.Tick.String())
	}
	return strings.Join(parts, ",")
}

// finiteNonNegative reports whether r can be a rate: a Poisson draw of an
// infinite or NaN mean never ends.
func finiteNonNegative(r float64) bool { return r >= 0 && !math.IsInf(r, 1) }

func (c Churn) validate() error {
	for _, r := range []float64{c.Crashes, c.CleanExits, c.PodReplacements, c.ShortLived} {
		if !finiteNonNegative(r) {
			return fmt.Errorf("churn rate %v must be a finite non-negative number", r)
		}
	}
	if c.Tick < 0 {
		return errors.New("churn tick must be positive")
	}
	return nil
}

// EventMode selects how GetContainerEvents behaves.
type EventMode int

const (
	// EventsContainerd mirrors containerd 2.x: every subscriber gets every
	// event through its own buffer of 100; publishing waits for a slow
	// subscriber, which stalls the runtime operations that emit events;
	// with no subscriber, events are kept for 5 minutes and the first
	// subscriber to connect receives them all.
	EventsContainerd EventMode = iota
	// EventsCRIO mirrors CRI-O with enable_pod_events on: one queue of
	// 1000 that drops (and counts) what does not fit, and one broadcaster
	// that hands each event to each subscriber in turn; no event when a
	// pod is removed, neither for its sandbox nor for the containers
	// removed with it.
	EventsCRIO
	// EventsOff mirrors CRI-O's default: GetContainerEvents ends at once
	// without an event, so clients see the stream's end (EOF).
	EventsOff
)

// ParseEventMode parses "containerd", "crio" (or "cri-o") and "off".
func ParseEventMode(s string) (EventMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "containerd":
		return EventsContainerd, nil
	case "crio", "cri-o":
		return EventsCRIO, nil
	case "off", "none":
		return EventsOff, nil
	}
	return 0, fmt.Errorf("event mode %q: want containerd, crio or off", s)
}

func (m EventMode) String() string {
	switch m {
	case EventsContainerd:
		return "containerd"
	case EventsCRIO:
		return "crio"
	case EventsOff:
		return "off"
	}
	return "EventMode(" + strconv.Itoa(int(m)) + ")"
}

// Validate reports every field that New would refuse, reading a zero
// field as its default.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// withDefaults fills in unset fields and checks the result.
func (o Options) withDefaults() (Options, error) {
	o = o.defaulted()
	return o, o.validate()
}

// defaulted is o with its unset fields set to their defaults.
func (o Options) defaulted() Options {
	if o.Churn.Tick == 0 {
		o.Churn.Tick = DefaultTick
	}
	if o.HistoryLimit == 0 {
		o.HistoryLimit = DefaultHistoryLimit
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// validate checks options whose defaults are set.
func (o Options) validate() error {
	var errs []error
	if _, err := o.Registry.normalized(); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseCgroupDriver(o.CgroupDriver); err != nil {
		errs = append(errs, err)
	}
	if o.Pods < 0 {
		errs = append(errs, fmt.Errorf("pods %d must not be negative", o.Pods))
	}
	if o.Containers < 0 {
		errs = append(errs, fmt.Errorf("containers %d must not be negative", o.Containers))
	}
	if o.Exited < 0 {
		errs = append(errs, fmt.Errorf("exited containers %d must not be negative", o.Exited))
	}
	if o.Exited > 0 && o.Containers == 0 {
		errs = append(errs, errors.New("exited containers need at least one container per pod"))
	}
	if err := o.Churn.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Events < EventsContainerd || o.Events > EventsOff {
		errs = append(errs, fmt.Errorf("unknown event mode %d", o.Events))
	}
	if err := o.Latency.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Faults.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Cgroup drivers of Options.CgroupDriver.
const (
	CgroupDriverSystemd  = "systemd"
	CgroupDriverCgroupfs = "cgroupfs"
)

// parseCgroupDriver maps Options.CgroupDriver to the CRI's value.
func parseCgroupDriver(s string) (runtimeapi.CgroupDriver, error) {
	switch s {
	case "", CgroupDriverSystemd:
		return runtimeapi.CgroupDriver_SYSTEMD, nil
	case CgroupDriverCgroupfs:
		return runtimeapi.CgroupDriver_CGROUPFS, nil
	}
	return 0, fmt.Errorf("cgroup driver %q: want %s or %s", s, CgroupDriverSystemd, CgroupDriverCgroupfs)
}

// DefaultImageFsMountpoint is ImageFsInfo's mount point by default.
const DefaultImageFsMountpoint = "/var/lib/pleg-sim/images"

func (o Options) imageFsMountpoint() string {
	if o.ImageFsMountpoint == "" {
		return DefaultImageFsMountpoint
	}
	return o.ImageFsMountpoint
}
