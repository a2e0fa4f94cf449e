// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"time"

	"github.com/plegkit/pleg/flightrec"
)

// Verdict is the diagnosis in a word.
type Verdict string

// Verdicts, from best to worst.
const (
	// Healthy: nothing found that would make the PLEG unhealthy.
	Healthy Verdict = "healthy"
	// AtRisk: the PLEG is healthy now, but something found would make it
	// unhealthy under load or after a restart, or delays its events.
	AtRisk Verdict = "at-risk"
	// Unhealthy: the PLEG is, or is about to be, unhealthy; or the runtime
	// does not answer.
	Unhealthy Verdict = "unhealthy"
)

// ExitCode is the exit status of pleg doctor for v: 0 healthy, 1 at risk,
// 2 unhealthy or unreachable.
func (v Verdict) ExitCode() int {
	switch v {
	case Healthy:
		return 0
	case AtRisk:
		return 1
	}
	return 2
}

// Severity ranks a finding.
type Severity string

// Severities, from worst to mildest.
const (
	// Critical findings make the verdict unhealthy.
	Critical Severity = "critical"
	// Warning findings make it at risk.
	Warning Severity = "warning"
	// Info findings explain without changing the verdict.
	Info Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case Critical:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Finding is one thing the diagnosis found, with what shows it and what to
// do about it.
type Finding struct {
	// ID names the kind of finding, stable across versions: hung-pod,
	// slow-pod, dead-containers, ...
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Evidence []string `json:"evidence"`
	Action   string   `json:"action"`
	// Pod is the pod the finding is about, if one.
	Pod *PodRef `json:"pod,omitempty"`
	// Operation is the CRI operation the finding is about, if one, named
	// as in kubelet_runtime_operations_total's operation_type.
	Operation string `json:"operation,omitempty"`

	// cause tells the finding names a cause that explains the symptoms
	// beside it: it is ranked before them (rankFindings).
	cause bool
}

// PodRef names a pod.
type PodRef struct {
	UID       string `json:"uid"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// String is namespace/name, or the UID when the runtime did not say.
func (p PodRef) String() string {
	if p.Name == "" {
		return "pod " + p.UID
	}
	return p.Namespace + "/" + p.Name
}

// Report is the whole diagnosis. Durations are in seconds, as Prometheus
// has them.
type Report struct {
	Endpoint        string    `json:"endpoint"`
	StartedAt       time.Time `json:"startedAt"`
	DurationSeconds float64   `json:"durationSeconds"`
	BudgetSeconds   float64   `json:"budgetSeconds"`

	Verdict  Verdict   `json:"verdict"`
	Findings []Finding `json:"findings"`

	Runtime    RuntimeInfo `json:"runtime"`
	Support    Support     `json:"support"`
	Operations []Operation `json:"operations"`
	Lists      []List      `json:"lists"`
	Workload   Workload    `json:"workload"`
	Inspection Inspection  `json:"inspection"`
	Projection Projection  `json:"projection"`
	Daemon     *Daemon     `json:"daemon,omitempty"`
	// Recording names the flight recording whose findings were added,
	// if one was.
	Recording string `json:"recording,omitempty"`
	// Node is the live view of the node below the CRI, taken by the
	// flight recorder's probes (Options.Node): the runtime's processes,
	// its shims and what they run, the kubelet and its PLEG, the host's
	// pressure, memory, PIDs, mounts and kernel log.
	Node *flightrec.Recording `json:"node,omitempty"`

	// pods are every inspected pod with its calls, for the assessment and
	// the charts; too many for the JSON report.
	pods []*podResult
	// names are the pods listed, by UID, sandbox and container ID: the
	// node's findings name the pod of a shim or a runc.
	names podNames
}

// RuntimeInfo is what the runtime says of itself.
type RuntimeInfo struct {
	// Reachable is whether the runtime answered Version.
	Reachable bool `json:"reachable"`
	// Error is why it did not, or why Status failed.
	Error      string      `json:"error,omitempty"`
	Name       string      `json:"name,omitempty"`
	Version    string      `json:"version,omitempty"`
	APIVersion string      `json:"apiVersion,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// Condition is one of the runtime's conditions: RuntimeReady,
// NetworkReady.
type Condition struct {
	Type    string `json:"type"`
	Status  bool   `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Availability says whether the runtime offers an optional RPC.
type Availability string

// Availabilities.
const (
	Supported   Availability = "supported"
	Unsupported Availability = "unsupported"
	// Unknown: the probe failed otherwise or was not run.
	Unknown Availability = "unknown"
)

// Probe is the answer to whether an optional RPC is offered.
type Probe struct {
	Availability Availability `json:"availability"`
	Detail       string       `json:"detail,omitempty"`
}

// Support tells which optional CRI RPCs the runtime offers.
type Support struct {
	StreamPodSandboxes Probe `json:"streamPodSandboxes"`
	StreamContainers   Probe `json:"streamContainers"`
	ContainerEvents    Probe `json:"containerEvents"`
	// SandboxStatusContainers: PodSandboxStatus answers with a Timestamp
	// and its containers' statuses, which spares a call per container.
	SandboxStatusContainers Probe `json:"sandboxStatusContainers"`
	// PodRemovalEvents: the event stream tells when a pod is removed
	// (CRI-O's does not), known of the runtime by its name.
	PodRemovalEvents Probe `json:"podRemovalEvents"`
}

// Operation summarizes the timed calls of one CRI operation.
type Operation struct {
	// Name is the operation_type: list_podsandbox, container_status, ...;
	// the per-pod lists a kubelet makes while inspecting a pod are
	// list_podsandbox_by_pod and list_containers_by_pod.
	Name     string `json:"name"`
	Calls    int    `json:"calls"`
	Errors   int    `json:"errors"`
	Timeouts int    `json:"timeouts"`

	MinSeconds float64 `json:"minSeconds"`
	P50Seconds float64 `json:"p50Seconds"`
	P90Seconds float64 `json:"p90Seconds"`
	P99Seconds float64 `json:"p99Seconds"`
	MaxSeconds float64 `json:"maxSeconds"`
}

// List is the size of a whole-node list as the kubelet receives it: one
// unary message, which its CRI client refuses past LimitBytes.
type List struct {
	Operation  string `json:"operation"`
	Items      int    `json:"items"`
	Bytes      int    `json:"bytes"`
	LimitBytes int    `json:"limitBytes"`
	Error      string `json:"error,omitempty"`
}

// Workload counts what the runtime holds.
type Workload struct {
	Pods              int `json:"pods"`
	SandboxesReady    int `json:"sandboxesReady"`
	SandboxesNotReady int `json:"sandboxesNotReady"`
	ContainersRunning int `json:"containersRunning"`
	ContainersExited  int `json:"containersExited"`
	ContainersCreated int `json:"containersCreated"`
	ContainersUnknown int `json:"containersUnknown"`
	// BeyondCollection is how many exited containers the kubelet's
	// garbage collector would have removed by default: all but the
	// newest exited one of each container name in a pod.
	BeyondCollection int `json:"beyondCollection"`
	// MostExited are the pods holding the most exited containers.
	MostExited []PodCount `json:"mostExited"`
}

// PodCount is a pod's count of something.
type PodCount struct {
	Pod   PodRef `json:"pod"`
	Count int    `json:"count"`
}

// Inspection tells how the pods were inspected and which were slowest.
type Inspection struct {
	// Pods inspected, out of Planned; Planned is below Workload.Pods
	// when sampling.
	Pods               int     `json:"pods"`
	Planned            int     `json:"planned"`
	Concurrency        int     `json:"concurrency"`
	CallTimeoutSeconds float64 `json:"callTimeoutSeconds"`
	// StoppedEarly says why not every planned pod was inspected.
	StoppedEarly string `json:"stoppedEarly,omitempty"`
	// SlowestOperation is the inspection's operation with the highest
	// p99, and SlowestOperationShare the part of the inspection's time
	// its calls took, 0 to 1.
	SlowestOperation      string  `json:"slowestOperation,omitempty"`
	SlowestOperationShare float64 `json:"slowestOperationShare,omitempty"`
	// SlowestPods are ranked by the time the kubelet's inspection of them
	// takes: both per-pod lists and every status call.
	SlowestPods       []PodTiming       `json:"slowestPods"`
	SlowestContainers []ContainerTiming `json:"slowestContainers"`
}

// PodTiming is the inspection of one pod.
type PodTiming struct {
	Pod     PodRef  `json:"pod"`
	Calls   int     `json:"calls"`
	Seconds float64 `json:"seconds"`
	// The slowest call: its operation, its container's name when a
	// container's, and its time.
	SlowestOperation string  `json:"slowestOperation"`
	SlowestContainer string  `json:"slowestContainer,omitempty"`
	SlowestSeconds   float64 `json:"slowestSeconds"`
	// Hung is whether a call got no answer within the call timeout.
	Hung  bool   `json:"hung,omitempty"`
	Error string `json:"error,omitempty"`
}

// ContainerTiming is the ContainerStatus call of one container.
type ContainerTiming struct {
	Pod     PodRef  `json:"pod"`
	ID      string  `json:"id"`
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Hung    bool    `json:"hung,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Projection estimates the relist from the measured calls.
type Projection struct {
	PeriodSeconds    float64 `json:"periodSeconds"`
	ThresholdSeconds float64 `json:"thresholdSeconds"`
	// AlertSeconds is where the stock KubeletPlegDurationHigh alert fires
	// (p99 of the relist duration, for 5 minutes).
	AlertSeconds float64 `json:"alertSeconds"`
	Pods         int     `json:"pods"`
	// Extrapolated: not every pod was inspected; per-pod costs were
	// scaled from those that were.
	Extrapolated bool `json:"extrapolated"`
	// SteadySeconds is a kubelet relist when no pod changed: both lists,
	// plus the reinspection of the pods whose inspection fails, which the
	// kubelet repeats on every relist.
	SteadySeconds float64 `json:"steadySeconds"`
	// KubeletWorstSeconds is a kubelet relist when every pod changed, as
	// on its first relist after a restart: the lists, then every pod
	// inspected one after the other, a hung call costing the runtime
	// request timeout (2 m). It counts the two per-pod lists kubelets
	// before 1.36 make for each pod; 1.36 reuses the relist's.
	KubeletWorstSeconds float64 `json:"kubeletWorstSeconds"`
	// PlegWorstSeconds is the same relist by pleg: no per-pod lists, pods
	// inspected PlegConcurrency at a time, a hung pod cut at pleg's
	// per-pod deadline. It assumes the runtime serves that many calls at
	// once; one short of CPU serves fewer.
	PlegWorstSeconds float64 `json:"plegWorstSeconds"`
	PlegConcurrency  int     `json:"plegConcurrency"`
	// RuntimeRequestTimeoutSeconds is the kubelet's per-call deadline and
	// PlegInspectTimeoutSeconds pleg's per-pod one, the projections' cost
	// of a hung call.
	RuntimeRequestTimeoutSeconds float64 `json:"runtimeRequestTimeoutSeconds"`
	PlegInspectTimeoutSeconds    float64 `json:"plegInspectTimeoutSeconds"`
}

// Daemon is what a running pleg daemon reports of its own relists.
type Daemon struct {
	URL   string `json:"url"`
	Error string `json:"error,omitempty"`
	// Healthy and Health are its /healthz answer.
	Healthy bool   `json:"healthy"`
	Health  string `json:"health,omitempty"`
	Mode    string `json:"mode,omitempty"`
	// Relists is the number of global relists done; the quantiles are
	// estimated from kubelet_pleg_relist_duration_seconds' buckets.
	Relists          uint64  `json:"relists"`
	RelistP50Seconds float64 `json:"relistP50Seconds"`
	RelistP99Seconds float64 `json:"relistP99Seconds"`
	// LastSeenSecondsAgo is the age of the last successful relist.
	LastSeenSecondsAgo float64 `json:"lastSeenSecondsAgo"`
	// RelistRunningSeconds is how long the relist in flight has run, if
	// one is.
	RelistRunningSeconds float64            `json:"relistRunningSeconds,omitempty"`
	InspectionFailures   map[string]float64 `json:"inspectionFailures,omitempty"`
	DiscardedEvents      float64            `json:"discardedEvents"`
}

// seconds converts a duration for the report.
func seconds(d time.Duration) float64 { return d.Seconds() }
