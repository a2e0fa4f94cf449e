// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package api is the daemon's HTTP API: health, metrics, the pod cache
// as JSON, and a resumable stream of events.
//
// The JSON types here are the wire format; clients such as `pleg watch
// --server` decode them.
package api

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
)

// TypeGap is the type of the line that replaces events a client asked for
// but the server no longer holds: re-read /v1/pods, then carry on.
const TypeGap = "Gap"

// Event is one line of GET /v1/events.
type Event struct {
	// Seq orders events; a client resumes after the last one it read.
	// With a state directory, numbers go on across restarts and never go
	// back; without one, each run starts at its start time in
	// microseconds, so that an earlier run's number reads as a gap.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Type string    `json:"type"`

	PodUID        string `json:"podUID,omitempty"`
	PodName       string `json:"podName,omitempty"`
	PodNamespace  string `json:"podNamespace,omitempty"`
	ContainerID   string `json:"containerID,omitempty"`
	ContainerName string `json:"containerName,omitempty"`
	Sandbox       bool   `json:"sandbox,omitempty"`

	// AfterRestart marks a change that happened while pleg was not
	// running, found when it started again; StartedAt and FinishedAt are
	// then the container's own times, where the runtime reports them.
	AfterRestart bool       `json:"afterRestart,omitempty"`
	StartedAt    *time.Time `json:"startedAt,omitempty"`
	// FinishedAt is also the container's own finish time on every
	// ContainerDied whose container the runtime reported exited.
	FinishedAt *time.Time `json:"finishedAt,omitempty"`

	// Image and Attempt are the container's image, as the runtime reports
	// it (see pleg.Event.Image) and as Container.Image shows it, and
	// its restart attempt (CRI metadata's attempt, 0 for the first run),
	// on container events whose container's status pleg inspected.
	// ExitCode, Reason ("Completed", "Error", "OOMKilled", …) and Message
	// say why it died, on a ContainerDied the runtime reported an exit
	// for. All are absent where the runtime reported nothing: sandboxes,
	// and a container that vanished without being seen exited.
	Image    string  `json:"image,omitempty"`
	Attempt  *uint32 `json:"attempt,omitempty"`
	ExitCode *int32  `json:"exitCode,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Message  string  `json:"message,omitempty"`

	// From and To bound the missing sequence numbers of a Gap, inclusive;
	// the stream goes on after To. From is above To for a client whose
	// number comes from a run whose clock was ahead: the numbers started
	// over lower, and what it missed of that run is unknown.
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
}

// NewEvent is ev as the API shows it.
func NewEvent(seq uint64, ev pleg.Event) Event {
	return Event{
		Seq: seq, Time: ev.Observed.UTC(), Type: string(ev.Type),
		PodUID: ev.PodUID, PodName: ev.PodName, PodNamespace: ev.PodNamespace,
		ContainerID: ev.ContainerID, ContainerName: ev.ContainerName, Sandbox: ev.Sandbox,
		AfterRestart: ev.AfterRestart, StartedAt: utc(ev.StartedAt), FinishedAt: utc(ev.FinishedAt),
		Image: ev.Image, Attempt: ev.Attempt, ExitCode: ev.ExitCode, Reason: ev.Reason, Message: ev.Message,
	}
}

// NewEntry is a journal entry as the API shows it: an event, or a gap
// stamped with the time it is told.
func NewEntry(e journal.Entry) Event {
	if e.Gap {
		return Event{Seq: e.Seq, Time: time.Now().UTC(), Type: TypeGap, From: e.From, To: e.To}
	}
	return NewEvent(e.Seq, e.Event)
}

func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// PodList is the answer to GET /v1/pods.
type PodList struct {
	// GlobalTimestamp is the time every pod below is known to be at least
	// as fresh as; null before the first complete relist.
	GlobalTimestamp *time.Time `json:"globalTimestamp"`
	Pods            []Pod      `json:"pods"`
}

// Pod is one pod of the cache.
type Pod struct {
	UID       string   `json:"uid"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	IPs       []string `json:"ips"`
	// Timestamp is the time of the observation the status comes from.
	Timestamp time.Time `json:"timestamp"`
	// Error is the error of the inspection that produced the status, if
	// it failed; the status is then what could be gathered.
	Error      string      `json:"error,omitempty"`
	Sandboxes  []Sandbox   `json:"sandboxes"`
	Containers []Container `json:"containers"`
}

// Sandbox is a pod sandbox's status.
type Sandbox struct {
	ID        string     `json:"id"`
	State     string     `json:"state"`
	Attempt   uint32     `json:"attempt"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
}

// Container is a container's status.
type Container struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	State        string     `json:"state"`
	CreatedAt    *time.Time `json:"createdAt,omitempty"`
	StartedAt    *time.Time `json:"startedAt,omitempty"`
	FinishedAt   *time.Time `json:"finishedAt,omitempty"`
	ExitCode     *int32     `json:"exitCode,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	Message      string     `json:"message,omitempty"`
	RestartCount int        `json:"restartCount"`
	Image        string     `json:"image,omitempty"`
}

// NewPod is the cache entry of pod uid as the API shows it.
func NewPod(uid string, e podcache.Entry) Pod {
	s := e.Status
	if s == nil {
		s = &runtime.PodStatus{UID: uid}
	}
	p := Pod{
		UID: uid, Name: s.Name, Namespace: s.Namespace,
		IPs:        s.IPs,
		Timestamp:  e.Modified.UTC(),
		Sandboxes:  []Sandbox{},
		Containers: []Container{},
	}
	if p.IPs == nil {
		p.IPs = []string{}
	}
	if e.Err != nil {
		p.Error = e.Err.Error()
	}
	for _, sb := range s.Sandboxes {
		p.Sandboxes = append(p.Sandboxes, Sandbox{
			ID: sb.GetId(), State: SandboxState(sb.GetState()), Attempt: sb.GetMetadata().GetAttempt(),
			CreatedAt: nanos(sb.GetCreatedAt()),
		})
	}
	for _, c := range s.Containers {
		ct := Container{
			ID: c.GetId(), Name: c.GetMetadata().GetName(), State: ContainerState(c.GetState()),
			CreatedAt: nanos(c.GetCreatedAt()), StartedAt: nanos(c.GetStartedAt()), FinishedAt: nanos(c.GetFinishedAt()),
			Reason: c.GetReason(), Message: c.GetMessage(),
			RestartCount: restartCount(c),
			Image:        cmp.Or(c.GetImage().GetImage(), c.GetImageRef()),
		}
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			code := c.GetExitCode()
			ct.ExitCode = &code
		}
		p.Containers = append(p.Containers, ct)
	}
	return p
}

// NewPodList is the whole cache, ordered by namespace, name and UID.
func NewPodList(entries map[string]podcache.Entry, global time.Time) PodList {
	l := PodList{Pods: make([]Pod, 0, len(entries))}
	if !global.IsZero() {
		g := global.UTC()
		l.GlobalTimestamp = &g
	}
	for uid, e := range entries {
		l.Pods = append(l.Pods, NewPod(uid, e))
	}
	slices.SortFunc(l.Pods, func(a, b Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return l
}

// WritePodList writes the JSON of NewPodList(entries, global), indented,
// one pod at a time: at 10,000 pods the whole list would take tens of
// megabytes more to build than to stream.
func WritePodList(w io.Writer, entries map[string]podcache.Entry, global time.Time) error {
	type keyed struct {
		uid string
		e   podcache.Entry
	}
	pods := make([]keyed, 0, len(entries))
	for uid, e := range entries {
		pods = append(pods, keyed{uid, e})
	}
	name := func(k keyed) (string, string) {
		if k.e.Status == nil {
			return "", ""
		}
		return k.e.Status.Namespace, k.e.Status.Name
	}
	slices.SortFunc(pods, func(a, b keyed) int {
		ans, an := name(a)
		bns, bn := name(b)
		return cmp.Or(cmp.Compare(ans, bns), cmp.Compare(an, bn), cmp.Compare(a.uid, b.uid))
	})

	bw := bufio.NewWriter(w)
	var g *time.Time
	if !global.IsZero() {
		t := global.UTC()
		g = &t
	}
	gt, _ := json.Marshal(g)
	_, _ = fmt.Fprintf(bw, "{\n  \"globalTimestamp\": %s,\n  \"pods\": ", gt) // bw keeps the error: Flush returns it
	if len(pods) == 0 {
		bw.WriteString("[]\n}\n")
		return bw.Flush()
	}
	bw.WriteString("[\n")
	for i, k := range pods {
		data, err := json.MarshalIndent(NewPod(k.uid, k.e), "    ", "  ")
		if err != nil {
			return err
		}
		bw.WriteString("    ")
		bw.Write(data)
		if i < len(pods)-1 {
			bw.WriteString(",")
		}
		// A write that failed (a client gone, or cut at a deadline)
		// fails every later one: stop encoding.
		if _, err := bw.WriteString("\n"); err != nil {
			return err
		}
	}
	bw.WriteString("  ]\n}\n")
	return bw.Flush()
}

// ContainerState names a CRI container state: created, running, exited or
// unknown.
func ContainerState(s runtimeapi.ContainerState) string {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return "created"
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return "running"
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return "exited"
	default:
		return "unknown"
	}
}

// SandboxState names a CRI sandbox state: ready or notready.
func SandboxState(s runtimeapi.PodSandboxState) string {
	switch s {
	case runtimeapi.PodSandboxState_SANDBOX_READY:
		return "ready"
	case runtimeapi.PodSandboxState_SANDBOX_NOTREADY:
		return "notready"
	default:
		return "unknown"
	}
}

// restartCount is the kubelet's restart count annotation, or the attempt.
func restartCount(c *runtimeapi.ContainerStatus) int {
	if n, err := strconv.Atoi(c.GetAnnotations()[runtime.ContainerRestartCountAnnotation]); err == nil {
		return n
	}
	return int(c.GetMetadata().GetAttempt())
}

func nanos(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}
