// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// What runtimes can do differs by runtime and version: containerd 1.7 has
// the event stream but no streaming lists, containerd 2.0.0 to 2.0.2 put a
// Timestamp without the container statuses in PodSandboxStatus, CRI-O
// sends events only with enable_pod_events. The adapter learns each
// capability from its own calls, as the generator makes them: a
// streaming list that answered, a PodSandboxStatus, an event stream that
// held or ended at once, the events themselves. Detect asks for all of it
// at once, for one-shot commands.

// EventsProbeWait is how long Detect and ProbeContainerEvents keep the
// event stream open to tell a runtime that has one from one that ends it
// at once.
const EventsProbeWait = 500 * time.Millisecond

// streamHeld is how long an event stream must stay open to count as one:
// CRI-O without pod events ends it at once.
const streamHeld = time.Second

// observer keeps what the adapter learned of the runtime.
type observer struct {
	mu   sync.Mutex
	caps runtime.Capabilities
	// sandboxStatusBoth is set once a PodSandboxStatus answered with a
	// Timestamp and container statuses: pods without containers answer
	// without statuses, and must not make it unsupported again.
	sandboxStatusBoth bool
	// containerRemovalSeen and podRemovalSeen are set once a DELETED
	// event showed the stream tells such removals.
	containerRemovalSeen, podRemovalSeen bool
}

func newObserver(limit int, streaming bool) *observer {
	o := &observer{caps: runtime.Capabilities{
		ContainerEvents:         runtime.Capability{Availability: runtime.Unknown, Detail: "not asked yet"},
		PodEvents:               runtime.Capability{Availability: runtime.Unknown, Detail: "no event seen yet"},
		StreamingLists:          runtime.Capability{Availability: runtime.Unknown, Detail: "not asked yet"},
		SandboxStatusContainers: runtime.Capability{Availability: runtime.Unknown, Detail: "no pod inspected yet"},
		ContainerRemovalEvents:  runtime.Capability{Availability: runtime.Unknown, Detail: "runtime not known yet"},
		PodRemovalEvents:        runtime.Capability{Availability: runtime.Unknown, Detail: "runtime not known yet"},
		Lists:                   runtime.ListSizes{LimitBytes: limit},
	}}
	if !streaming {
		o.caps.StreamingLists.Detail = "not used: streaming disabled"
	}
	return o
}

func (o *observer) update(f func(c *runtime.Capabilities)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(&o.caps)
}

func (o *observer) snapshot() runtime.Capabilities {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.caps
}

func (o *observer) version(v *runtimeapi.VersionResponse) {
	o.update(func(c *runtime.Capabilities) {
		c.RuntimeName, c.RuntimeVersion = v.GetRuntimeName(), v.GetRuntimeVersion()
		containers, pods := KnownRemovalEvents(c.RuntimeName)
		// What events showed stands.
		if !o.containerRemovalSeen {
			c.ContainerRemovalEvents = containers
		}
		if !o.podRemovalSeen {
			c.PodRemovalEvents = pods
		}
	})
}

// KnownRemovalEvents tells what the event stream of the runtime called
// name (in its Version answer) tells of removals, as measured on the
// runtimes pleg is tested on (TestRemovalEvents in test/e2e checks it on
// each): containerd tells every removal; CRI-O tells a container's removal
// by RemoveContainer, and sends nothing when RemovePodSandbox removes a
// pod, neither for its sandbox nor for the containers removed with it.
// Of other runtimes nothing is known.
func KnownRemovalEvents(name string) (containers, pods runtime.Capability) {
	switch name {
	case "containerd":
		return runtime.Capability{Availability: runtime.Supported, Detail: "known of containerd"},
			runtime.Capability{Availability: runtime.Supported, Detail: "known of containerd"}
	case "cri-o":
		return runtime.Capability{Availability: runtime.Supported, Detail: "known of CRI-O"},
			runtime.Capability{Availability: runtime.Unsupported, Detail: "known of CRI-O: no event when a pod is removed"}
	default:
		unknown := runtime.Capability{
			Availability: runtime.Unknown,
			Detail:       fmt.Sprintf("not known of %q until a removal shows it", name),
		}
		return unknown, unknown
	}
}

// removalEvents returns what the stream is known to tell of removals.
func (o *observer) removalEvents() (containers, pods runtime.Availability) {
	c := o.snapshot()
	return c.ContainerRemovalEvents.Availability, c.PodRemovalEvents.Availability
}

// streamedList records what a streaming list answered.
func (o *observer) streamedList(rpc string, err error) {
	switch {
	case err == nil:
		o.update(func(c *runtime.Capabilities) {
			c.StreamingLists = runtime.Capability{Availability: runtime.Supported, Detail: rpc + " answered"}
		})
	case status.Code(err) == codes.Unimplemented:
		o.update(func(c *runtime.Capabilities) {
			c.StreamingLists = runtime.Capability{Availability: runtime.Unsupported, Detail: rpc + " is Unimplemented"}
		})
	}
}

// list records the size of a whole-node list's answer.
func (o *observer) list(sandboxes bool, items int, n *counter, streamed bool) {
	size := runtime.ListSize{
		Items:               items,
		Bytes:               n.total,
		LargestMessageBytes: n.largest,
		Streamed:            streamed,
		At:                  time.Now(),
	}
	o.update(func(c *runtime.Capabilities) {
		if sandboxes {
			c.Lists.PodSandboxes = size
		} else {
			c.Lists.Containers = size
		}
	})
}

// sandboxStatus records whether a PodSandboxStatus answer carried the
// pod's container statuses.
func (o *observer) sandboxStatus(resp *runtimeapi.PodSandboxStatusResponse) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sandboxStatusBoth {
		return
	}
	o.caps.SandboxStatusContainers = SandboxStatusContainers(resp)
	o.sandboxStatusBoth = o.caps.SandboxStatusContainers.Availability == runtime.Supported
}

// SandboxStatusContainers tells whether a PodSandboxStatus answer carries
// the statuses of its pod's containers, by the kubelet's rule: a Timestamp
// and ContainersStatuses, both. A runtime that has them answers without
// statuses for a pod without containers, so one answer with both shows
// the capability; one without does not show its lack.
func SandboxStatusContainers(resp *runtimeapi.PodSandboxStatusResponse) runtime.Capability {
	switch {
	case resp.GetTimestamp() != 0 && len(resp.GetContainersStatuses()) > 0:
		return runtime.Capability{Availability: runtime.Supported, Detail: "Timestamp and ContainersStatuses set"}
	case resp.GetTimestamp() != 0:
		return runtime.Capability{Availability: runtime.Unsupported, Detail: "Timestamp set without ContainersStatuses"}
	default:
		return runtime.Capability{Availability: runtime.Unsupported, Detail: "no Timestamp, no ContainersStatuses"}
	}
}

// event records what an event carries. It runs for every event, on the
// stream's reader: it only takes the lock, and builds no text, once what
// the events show is known.
func (o *observer) event(ev *runtimeapi.ContainerEventResponse) {
	sb := ev.GetPodSandboxStatus()
	deleted := ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	o.mu.Lock()
	defer o.mu.Unlock()
	c := &o.caps
	if c.ContainerEvents.Availability != runtime.Supported || c.ContainerEvents.Detail != eventsArrive {
		c.ContainerEvents = runtime.Capability{Availability: runtime.Supported, Detail: eventsArrive}
	}
	switch {
	case sb != nil:
		if c.PodEvents.Availability != runtime.Supported {
			c.PodEvents = runtime.Capability{Availability: runtime.Supported, Detail: "events carry the sandbox status and " +
				"the container statuses"}
		}
	case !deleted:
		// containerd sends a DELETED without the pod when the sandbox is
		// already gone; any other event without it means the runtime
		// does not send the pod.
		c.PodEvents = runtime.Capability{Availability: runtime.Unsupported, Detail: "an event came without the sandbox " +
			"status"}
	}
	if !deleted {
		return
	}
	// A DELETED about the sandbox, or without it (the sandbox is gone:
	// containers go before their sandbox), tells a pod's removal.
	if sb == nil || sb.GetId() == ev.GetContainerId() {
		if !o.podRemovalSeen {
			o.podRemovalSeen = true
			c.PodRemovalEvents = runtime.Capability{Availability: runtime.Supported, Detail: "a DELETED event arrived for a " +
				"removed sandbox"}
		}
	} else if !o.containerRemovalSeen {
		o.containerRemovalSeen = true
		c.ContainerRemovalEvents = runtime.Capability{Availability: runtime.Supported, Detail: "a DELETED event arrived " +
			"for a removed container"}
	}
}

// eventsArrive is ContainerEvents' detail once an event arrived.
const eventsArrive = "events arrive"

// streamEnded records how an event stream ended: err from opening it or
// from its Recv, held whether it had stayed open for a while.
func (o *observer) streamEnded(err error, held bool) {
	p := classifyEvents(err, held)
	if p.Availability == runtime.Unknown {
		return // a failure says nothing about the stream
	}
	o.update(func(c *runtime.Capabilities) { c.ContainerEvents = p })
}

// classifyEvents tells what the end of an event stream says of the
// runtime's: err is what opening it or its first Recv returned, held
// whether it stayed open for a while first (until the caller's own
// deadline, or streamHeld), which means there is a stream even when it
// then ended cleanly.
func classifyEvents(err error, held bool) runtime.Capability {
	switch {
	case err == nil:
		return runtime.Capability{Availability: runtime.Supported, Detail: "an event arrived"}
	case status.Code(err) == codes.Unimplemented:
		return runtime.Capability{Availability: runtime.Unsupported, Detail: "Unimplemented"}
	case held && (errors.Is(err, io.EOF) ||
		status.Code(err) == codes.DeadlineExceeded || status.Code(err) == codes.Canceled):
		return runtime.Capability{Availability: runtime.Supported, Detail: "stream open"}
	case errors.Is(err, io.EOF):
		return runtime.Capability{Availability: runtime.Unsupported, Detail: "the stream ends at once"}
	default:
		s := status.Convert(err)
		return runtime.Capability{Availability: runtime.Unknown, Detail: s.Code().String() + ": " + s.Message()}
	}
}

// ProbeContainerEvents opens client's container event stream and waits
// for wait, or ctx's end if sooner, to tell whether the runtime has one: a
// runtime without it answers Unimplemented (containerd 1.6) or ends the
// stream at once (CRI-O without enable_pod_events); one with it keeps the
// stream open, or sends an event. cut reports that ctx ended first, so
// that the answer says nothing.
//
// On containerd 1.7 the subscribers of the event stream compete for its
// events: a probe beside a running generator may take some from it.
func ProbeContainerEvents(
	ctx context.Context,
	client runtimeapi.RuntimeServiceClient,
	wait time.Duration,
) (c runtime.Capability, cut bool) {
	_, c, cut = probeEvents(ctx, client, wait)
	return c, cut
}

// probeEvents is ProbeContainerEvents, with the event that arrived, if
// one did.
func probeEvents(
	ctx context.Context,
	client runtimeapi.RuntimeServiceClient,
	wait time.Duration,
) (*runtimeapi.ContainerEventResponse, runtime.Capability, bool) {
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var ev *runtimeapi.ContainerEventResponse
	stream, err := client.GetContainerEvents(pctx, &runtimeapi.GetEventsRequest{})
	if err == nil {
		ev, err = stream.Recv()
	}
	if ctx.Err() != nil {
		return nil, runtime.Capability{Availability: runtime.Unknown, Detail: "cut short"}, true
	}
	// The runtime learns the deadline on the wire, rounded down, and may
	// end the stream cleanly a moment before our own context fires.
	deadline, _ := pctx.Deadline()
	held := pctx.Err() != nil || time.Until(deadline) < wait/10
	return ev, classifyEvents(err, held), false
}

// StreamPodSandboxes lists every sandbox of client with the
// StreamPodSandboxes RPC alone, without falling back to the unary list, as
// a probe of the RPC does: a runtime without it answers Unimplemented.
// opts are added to the call.
func StreamPodSandboxes(
	ctx context.Context,
	client runtimeapi.RuntimeServiceClient,
	opts ...grpc.CallOption,
) ([]*runtimeapi.PodSandbox, error) {
	stream, err := client.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{}, opts...)
	return drainList(stream, err, (*runtimeapi.StreamPodSandboxesResponse).GetPodSandboxes, nil)
}

// StreamContainers is StreamPodSandboxes for containers.
func StreamContainers(
	ctx context.Context,
	client runtimeapi.RuntimeServiceClient,
	opts ...grpc.CallOption,
) ([]*runtimeapi.Container, error) {
	stream, err := client.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{}, opts...)
	return drainList(stream, err, (*runtimeapi.StreamContainersResponse).GetContainers, nil)
}

// Capabilities implements runtime.CapabilityReporter: what the adapter
// learned of the runtime from the calls made so far (see Detect).
func (r *Runtime) Capabilities() runtime.Capabilities { return r.obs.snapshot() }

// ListSizes implements runtime.ListSizer: the sizes of the latest answers
// to the whole-node lists (ListPodSandbox and ListContainers without a
// filter, unary or streamed), in bytes on the wire, against
// MaxRecvMsgSize, the largest message accepted. A list whose largest
// message nears the limit is one the runtime will soon fail to send; the
// kubelet's own limit is 16 MiB.
func (r *Runtime) ListSizes() runtime.ListSizes { return r.obs.snapshot().Lists }

var (
	_ runtime.CapabilityReporter = (*Runtime)(nil)
	_ runtime.ListSizer          = (*Runtime)(nil)
)

// Detect asks the runtime what it can do, now: its version, both lists
// (streamed where it can), the event stream (kept open EventsProbeWait),
// and the status of the newest ready sandbox, if there is one. It returns
// Capabilities after, and an error only when the runtime does not answer
// Version. It makes whole-node lists: use it once, at start or in a
// one-shot command, not on a schedule. It opens an event stream of its
// own: on containerd 1.7, whose subscribers compete for events, not
// beside a running generator.
func (r *Runtime) Detect(ctx context.Context) (runtime.Capabilities, error) {
	if _, err := r.Version(ctx); err != nil {
		return r.Capabilities(), err
	}
	sandboxes, _ := r.ListPodSandbox(ctx, nil)
	_, _ = r.ListContainers(ctx, nil)
	ev, probe, cut := probeEvents(ctx, r.client, EventsProbeWait)
	switch {
	case ev != nil:
		r.obs.event(ev)
	case !cut && probe.Availability != runtime.Unknown:
		r.obs.update(func(c *runtime.Capabilities) { c.ContainerEvents = probe })
	}
	var newest *runtimeapi.PodSandbox
	for _, s := range sandboxes {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY &&
			(newest == nil || s.GetCreatedAt() > newest.GetCreatedAt()) {
			newest = s
		}
	}
	if newest != nil {
		_, _ = r.PodSandboxStatus(ctx, newest.GetId(), false)
	}
	return r.Capabilities(), nil
}
