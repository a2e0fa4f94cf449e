// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/internal/crilist"
	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

// Operations other than the kubelet's (runtime's Op constants): the
// streamed lists, and the per-pod lists of a kubelet's pod inspection.
const (
	opStreamPodSandboxes    = "stream_podsandboxes"
	opStreamContainers      = "stream_containers"
	opListPodSandboxByPod   = "list_podsandbox_by_pod"
	opListContainersByPod   = "list_containers_by_pod"
	maxListBytes            = 256 << 20
	eventsProbeWait         = 500 * time.Millisecond
	slowestShown            = 10
	mostExitedShown         = 5
	listPhaseBudgetFraction = 4 // the list samples may take a quarter of the budget
)

// operationOrder is the order operations are reported in: a relist's.
var operationOrder = []string{
	runtime.OpVersion,
	runtime.OpStatus,
	runtime.OpListPodSandbox,
	runtime.OpListContainers,
	opStreamPodSandboxes,
	opStreamContainers,
	opListPodSandboxByPod,
	runtime.OpPodSandboxStatus,
	opListContainersByPod,
	runtime.OpContainerStatus,
}

// call is one timed CRI call.
type call struct {
	op string
	// target is what a status call asked about: a sandbox ID, or a
	// container's name; id is a container's ID.
	target, id string
	took       time.Duration
	err        error
	// hung: no answer within timeout, the time the call was given.
	hung    bool
	timeout time.Duration
	// cut: ended by the budget or by cancellation, which says nothing of
	// the runtime.
	cut bool
}

// describe says how a call failed, for a report.
func (c call) describe() string {
	switch {
	case c.hung:
		return "no answer within " + c.timeout.String()
	case c.cut:
		return "cut short by the time budget"
	case c.err == nil:
		return ""
	}
	s := status.Convert(c.err)
	return s.Code().String() + ": " + s.Message()
}

// podResult is the inspection of one pod, calls in the kubelet's order.
type podResult struct {
	pod   PodRef
	calls []call
	// cut: the budget ended it; its calls are not a pod's cost.
	cut bool
}

// failed reports whether a kubelet's inspection of the pod fails, so that
// the kubelet inspects it again on every relist.
func (p *podResult) failed() bool {
	return slices.ContainsFunc(p.calls, func(c call) bool { return c.err != nil })
}

func (p *podResult) hung() bool {
	return slices.ContainsFunc(p.calls, func(c call) bool { return c.hung })
}

// measured is the time its calls took here.
func (p *podResult) measured() time.Duration {
	var d time.Duration
	for _, c := range p.calls {
		d += c.took
	}
	return d
}

// kubeletCost is what inspecting the pod costs a kubelet's relist: every
// call in turn, a hung one waiting out the runtime request timeout.
func (p *podResult) kubeletCost(requestTimeout time.Duration) time.Duration {
	var d time.Duration
	for _, c := range p.calls {
		if c.hung {
			d += requestTimeout
		} else {
			d += c.took
		}
	}
	return d
}

// plegCost is what inspecting the pod costs pleg: its status calls only
// (pleg reuses the relist's lists), cut at the per-pod deadline, which a
// hung call runs into.
func (p *podResult) plegCost(deadline time.Duration) time.Duration {
	var d time.Duration
	for _, c := range p.calls {
		switch {
		case c.hung:
			return deadline
		case c.op == runtime.OpPodSandboxStatus || c.op == runtime.OpContainerStatus:
			d += c.took
		}
	}
	return min(d, deadline)
}

// slowest is the pod's slowest call: the one without an answer if any.
func (p *podResult) slowest() call {
	var s call
	for _, c := range p.calls {
		if c.hung {
			return c
		}
		if c.took > s.took || s.op == "" {
			s = c
		}
	}
	return s
}

// podItems are one pod's listed sandboxes and containers.
type podItems struct {
	ref        PodRef
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

// diagnosis gathers a Report.
type diagnosis struct {
	client runtimeapi.RuntimeServiceClient
	opts   Options
	clock  clock.PassiveClock
	rep    *Report
	// started is on the clock, which times; deadline is in real time,
	// which bounds.
	started  time.Time
	deadline time.Time

	mu    sync.Mutex
	calls map[string][]call
}

func newDiagnosis(client runtimeapi.RuntimeServiceClient, opts Options) *diagnosis {
	d := &diagnosis{
		client:   client,
		opts:     opts,
		clock:    opts.Clock,
		started:  opts.Clock.Now(),
		deadline: time.Now().Add(opts.Budget),
		calls:    make(map[string][]call),
	}
	d.rep = &Report{
		Endpoint:      opts.Endpoint,
		StartedAt:     d.started,
		BudgetSeconds: seconds(opts.Budget),
		Support: Support{
			StreamPodSandboxes:      Probe{Availability: Unknown, Detail: "not probed"},
			StreamContainers:        Probe{Availability: Unknown, Detail: "not probed"},
			ContainerEvents:         Probe{Availability: Unknown, Detail: "not probed"},
			SandboxStatusContainers: Probe{Availability: Unknown, Detail: "no pod inspected"},
			PodRemovalEvents:        Probe{Availability: Unknown, Detail: "runtime not identified"},
		},
		Inspection: Inspection{Concurrency: opts.Concurrency, CallTimeoutSeconds: seconds(opts.CallTimeout)},
	}
	return d
}

// run gathers everything it can within ctx, which ends with the budget.
func (d *diagnosis) run(ctx context.Context) {
	defer d.summarize()
	if !d.identify(ctx) {
		return
	}
	sandboxes, containers := d.sampleLists(ctx)
	if s, c, ok := d.probeStreams(ctx); ok && (sandboxes == nil || containers == nil) {
		// The kubelet's unary lists failed; the streamed ones still tell
		// what the runtime holds.
		if sandboxes == nil {
			sandboxes = s
		}
		if containers == nil {
			containers = c
		}
	}
	d.probeEvents(ctx)
	pods := groupPods(sandboxes, containers)
	d.rep.names = nameIndex(pods)
	d.rep.Workload = countWorkload(pods, sandboxes, containers)
	d.inspect(ctx, pods)
}

// timed makes one call with the call timeout, never past the budget, and
// records it.
func (d *diagnosis) timed(ctx context.Context, op string, f func(context.Context) error) call {
	timeout := min(d.opts.CallTimeout, time.Until(d.deadline))
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := cctx.Deadline()
	start := d.clock.Now()
	err := f(cctx)
	c := call{op: op, took: d.clock.Since(start), err: err, timeout: timeout}
	switch {
	case err == nil:
	case status.Code(err) == codes.NotFound && (op == runtime.OpPodSandboxStatus || op == runtime.OpContainerStatus):
		// Removed since the list: a race, as the kubelet takes it.
		c.err = nil
	case ctx.Err() != nil:
		c.cut = true
	case cctx.Err() != nil, status.Code(err) == codes.DeadlineExceeded && nearDeadline(deadline, timeout):
		c.hung = true
	}
	if !c.cut && status.Code(err) != codes.Unimplemented {
		d.mu.Lock()
		d.calls[op] = append(d.calls[op], c)
		d.mu.Unlock()
	}
	return c
}

// nearDeadline reports whether a call given timeout that ended now ended
// at its deadline. The runtime learns the deadline on the wire, rounded
// down, and may give up, or end a stream cleanly, a moment before our own
// context fires.
func nearDeadline(deadline time.Time, timeout time.Duration) bool {
	return time.Until(deadline) < timeout/10
}

// identify asks the runtime for its version and conditions; false means it
// does not answer.
func (d *diagnosis) identify(ctx context.Context) bool {
	rt := &d.rep.Runtime
	var v *runtimeapi.VersionResponse
	c := d.timed(ctx, runtime.OpVersion, func(ctx context.Context) (err error) {
		v, err = d.client.Version(ctx, &runtimeapi.VersionRequest{})
		return err
	})
	if c.err != nil {
		rt.Error = "Version: " + c.describe()
		return false
	}
	rt.Reachable = true
	rt.Name, rt.Version, rt.APIVersion = v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion()
	_, pods := cri.KnownRemovalEvents(rt.Name)
	d.rep.Support.PodRemovalEvents = Probe{Availability: Availability(pods.Availability), Detail: pods.Detail}

	var s *runtimeapi.StatusResponse
	c = d.timed(ctx, runtime.OpStatus, func(ctx context.Context) (err error) {
		s, err = d.client.Status(ctx, &runtimeapi.StatusRequest{})
		return err
	})
	if c.err != nil {
		rt.Error = "Status: " + c.describe()
		return true
	}
	for _, cond := range s.GetStatus().GetConditions() {
		rt.Conditions = append(
			rt.Conditions,
			Condition{Type: cond.GetType(), Status: cond.GetStatus(), Reason: cond.GetReason(), Message: cond.GetMessage()},
		)
	}
	return true
}

// sizeCodec is the proto codec counting the bytes it decodes: the size of
// a list as the kubelet's client receives it.
type sizeCodec struct {
	encoding.CodecV2
	bytes int
}

func newSizeCodec() *sizeCodec { return &sizeCodec{CodecV2: encoding.GetCodecV2(protocodec.Name)} }

// Name is empty, so that the call goes out as application/grpc, the only
// content-type CRI-O's socket admits (see runtime/cri).
func (c *sizeCodec) Name() string { return "" }

func (c *sizeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.bytes += data.Len()
	return c.CodecV2.Unmarshal(data, v)
}

// tooLarge reads the size out of gRPC's error for a message past the
// receive limit.
var tooLarge = regexp.MustCompile(`larger than max \((\d+) vs\. \d+\)`)

// sampleLists times the whole-node lists as the kubelet makes them, unary,
// and returns the last items listed; nil where a list never succeeded.
func (d *diagnosis) sampleLists(ctx context.Context) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	var (
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		sbList     = List{Operation: runtime.OpListPodSandbox, LimitBytes: msgsize.KubeletMax}
		ctrList    = List{Operation: runtime.OpListContainers, LimitBytes: msgsize.KubeletMax}
		sbDone     bool
		ctrDone    bool
	)
	// sample makes one list call; it reports whether to sample again.
	sample := func(l *List, f func(context.Context, ...grpc.CallOption) (int, error)) bool {
		codec := newSizeCodec()
		var n int
		c := d.timed(ctx, l.Operation, func(ctx context.Context) (err error) {
			n, err = f(ctx, grpc.ForceCodecV2(codec), grpc.MaxCallRecvMsgSize(maxListBytes))
			return err
		})
		switch {
		case c.err == nil:
			l.Items, l.Bytes, l.Error = n, codec.bytes, ""
		case l.Items == 0:
			l.Error = c.describe()
			if m := tooLarge.FindStringSubmatch(c.err.Error()); m != nil {
				l.Bytes, _ = strconv.Atoi(m[1])
			}
		}
		// A hung list would only hang again.
		return !c.hung && !c.cut
	}
	phaseEnd := time.Now().Add(d.opts.Budget / listPhaseBudgetFraction)
	for i := range d.opts.ListSamples {
		if i > 0 && time.Now().After(phaseEnd) || ctx.Err() != nil || sbDone && ctrDone {
			break
		}
		if !sbDone {
			sbDone = !sample(&sbList, func(ctx context.Context, opts ...grpc.CallOption) (int, error) {
				resp, err := d.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}, opts...)
				if err == nil {
					sandboxes = resp.GetItems()
				}
				return len(resp.GetItems()), err
			})
		}
		if !ctrDone {
			ctrDone = !sample(&ctrList, func(ctx context.Context, opts ...grpc.CallOption) (int, error) {
				resp, err := d.client.ListContainers(ctx, &runtimeapi.ListContainersRequest{}, opts...)
				if err == nil {
					containers = resp.GetContainers()
				}
				return len(resp.GetContainers()), err
			})
		}
	}
	d.rep.Lists = []List{sbList, ctrList}
	if sbList.Error != "" {
		sandboxes = nil
	}
	if ctrList.Error != "" {
		containers = nil
	}
	return sandboxes, containers
}

// probeStreams asks for the streamed lists once each; ok when both
// answered, with their items.
func (d *diagnosis) probeStreams(ctx context.Context) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, bool) {
	var (
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
	)
	okS := d.probeStream(
		ctx,
		opStreamPodSandboxes,
		&d.rep.Support.StreamPodSandboxes,
		func(ctx context.Context) (n int, err error) {
			sandboxes, err = cri.StreamPodSandboxes(ctx, d.client)
			return len(sandboxes), err
		},
	)
	okC := d.probeStream(
		ctx,
		opStreamContainers,
		&d.rep.Support.StreamContainers,
		func(ctx context.Context) (n int, err error) {
			containers, err = cri.StreamContainers(ctx, d.client)
			return len(containers), err
		},
	)
	return sandboxes, containers, okS && okC
}

func (d *diagnosis) probeStream(ctx context.Context, op string, p *Probe, f func(context.Context) (int, error)) bool {
	var n int
	c := d.timed(ctx, op, func(ctx context.Context) (err error) {
		n, err = f(ctx)
		return err
	})
	switch {
	case c.err == nil:
		*p = Probe{Availability: Supported, Detail: fmt.Sprintf("%d items", n)}
		return true
	case status.Code(c.err) == codes.Unimplemented:
		*p = Probe{Availability: Unsupported, Detail: "Unimplemented"}
	default:
		*p = Probe{Availability: Unknown, Detail: c.describe()}
	}
	return false
}

// probeEvents opens the container event stream and waits briefly: a
// runtime without it answers Unimplemented (containerd 1.x) or ends the
// stream at once (CRI-O without enable_pod_events); one with it keeps the
// stream open.
func (d *diagnosis) probeEvents(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	c, cut := cri.ProbeContainerEvents(ctx, d.client, min(eventsProbeWait, time.Until(d.deadline)))
	if cut {
		c.Detail = "cut short by the time budget"
	}
	d.rep.Support.ContainerEvents = Probe{Availability: Availability(c.Availability), Detail: c.Detail}
}

// sandboxStatus notes whether a PodSandboxStatus answer carried its
// pod's container statuses: one answer with them shows the runtime has
// them.
func (d *diagnosis) sandboxStatus(resp *runtimeapi.PodSandboxStatusResponse) {
	c := cri.SandboxStatusContainers(resp)
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := &d.rep.Support.SandboxStatusContainers; p.Availability != Supported {
		*p = Probe{Availability: Availability(c.Availability), Detail: c.Detail}
	}
}

// groupPods groups the listed items by pod UID as the kubelet does
// (crilist.Group), sorted for the report: pods by namespace, name and UID,
// each pod's sandboxes newest first, the order the kubelet inspects them.
func groupPods(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) []*podItems {
	grouped := crilist.Group(sandboxes, containers)
	pods := make([]*podItems, 0, len(grouped))
	for _, g := range grouped {
		p := &podItems{ref: PodRef{UID: g.UID, Name: g.Name, Namespace: g.Namespace}, sandboxes: g.Sandboxes,
			containers: g.Containers}
		slices.SortStableFunc(p.sandboxes, func(a, b *runtimeapi.PodSandbox) int {
			return cmp.Or(cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
		})
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(a, b *podItems) int { return comparePods(a.ref, b.ref) })
	return pods
}

func comparePods(a, b PodRef) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
}

// nameIndex names the listed pods by UID and by their sandboxes' and
// containers' IDs, for the node's findings.
func nameIndex(pods []*podItems) podNames {
	n := podNames{}
	for _, p := range pods {
		n[p.ref.UID] = p.ref
		for _, sb := range p.sandboxes {
			n[sb.GetId()] = p.ref
		}
		for _, c := range p.containers {
			n[c.GetId()] = p.ref
		}
	}
	return n
}

// countWorkload counts what the lists hold.
func countWorkload(pods []*podItems, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) Workload {
	w := Workload{Pods: len(pods), MostExited: []PodCount{}}
	for _, sb := range sandboxes {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			w.SandboxesReady++
		} else {
			w.SandboxesNotReady++
		}
	}
	for _, c := range containers {
		switch c.GetState() {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			w.ContainersRunning++
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			w.ContainersExited++
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			w.ContainersCreated++
		default:
			w.ContainersUnknown++
		}
	}
	var exited []PodCount
	for _, p := range pods {
		byName := make(map[string]int)
		n := 0
		for _, c := range p.containers {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
				byName[cmp.Or(c.GetMetadata().GetName(), c.GetLabels()[runtime.ContainerNameLabel])]++
				n++
			}
		}
		for _, k := range byName {
			// The kubelet's collector keeps the newest exited container
			// of each name (--maximum-dead-containers-per-container=1).
			w.BeyondCollection += k - 1
		}
		if n > 0 {
			exited = append(exited, PodCount{Pod: p.ref, Count: n})
		}
	}
	slices.SortFunc(
		exited,
		func(a, b PodCount) int { return cmp.Or(cmp.Compare(b.Count, a.Count), comparePods(a.Pod, b.Pod)) },
	)
	w.MostExited = append(w.MostExited, exited[:min(len(exited), mostExitedShown)]...)
	return w
}

// plan picks the pods to inspect: all, or n spread evenly over the sorted
// pods.
func plan(pods []*podItems, n int) []*podItems {
	if n <= 0 || n >= len(pods) {
		return pods
	}
	out := make([]*podItems, n)
	for i := range n {
		out[i] = pods[i*len(pods)/n]
	}
	return out
}

// inspect times the inspection of the planned pods, Concurrency at a
// time, until the budget runs out.
func (d *diagnosis) inspect(ctx context.Context, pods []*podItems) {
	todo := plan(pods, d.opts.Sample)
	in := &d.rep.Inspection
	in.Planned = len(todo)
	results := make([]*podResult, len(todo))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(d.opts.Concurrency, len(todo)) {
		wg.Go(func() {
			for i := range next {
				results[i] = d.inspectPod(ctx, todo[i])
			}
		})
	}
dispatch:
	for i := range todo {
		select {
		case next <- i:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(next)
	wg.Wait()
	for _, r := range results {
		if r != nil && !r.cut {
			d.rep.pods = append(d.rep.pods, r)
		}
	}
	in.Pods = len(d.rep.pods)
	if in.Pods < in.Planned {
		in.StoppedEarly = "the time budget ran out"
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) && ctx.Err() != nil {
			in.StoppedEarly = "interrupted"
		}
	}
}

// inspectPod inspects a pod as the kubelet does: its sandboxes listed and
// each one's status, then its containers listed and each one's status. It
// goes on past errors, to time every call, but stops at a call without an
// answer, as the kubelet's inspection would.
func (d *diagnosis) inspectPod(ctx context.Context, p *podItems) *podResult {
	r := &podResult{pod: p.ref}
	step := func(c call) bool {
		r.calls = append(r.calls, c)
		r.cut = r.cut || c.cut
		return !c.hung && !c.cut
	}
	uid := p.ref.UID
	if !step(d.timed(ctx, opListPodSandboxByPod, func(ctx context.Context) error {
		_, err := d.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: runtime.PodSandboxFilterForPod(uid)})
		return err
	})) {
		return r
	}
	for _, sb := range p.sandboxes {
		c := d.timed(ctx, runtime.OpPodSandboxStatus, func(ctx context.Context) error {
			resp, err := d.client.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.GetId()})
			if err == nil {
				d.sandboxStatus(resp)
			}
			return err
		})
		c.target = sb.GetId()
		if !step(c) {
			return r
		}
	}
	if !step(d.timed(ctx, opListContainersByPod, func(ctx context.Context) error {
		_, err := d.client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: runtime.ContainerFilterForPod(uid)})
		return err
	})) {
		return r
	}
	for _, ctr := range p.containers {
		c := d.timed(ctx, runtime.OpContainerStatus, func(ctx context.Context) error {
			_, err := d.client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.GetId()})
			return err
		})
		c.target = cmp.Or(ctr.GetMetadata().GetName(), ctr.GetLabels()[runtime.ContainerNameLabel])
		c.id = ctr.GetId()
		if !step(c) {
			return r
		}
	}
	return r
}
