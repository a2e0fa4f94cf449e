// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/cri"
)

// wantCapabilities is what each runtime can do, as measured; see the
// README's table of runtimes.
func wantCapabilities(spec runtimetest.Spec) (events, podEvents, streaming, sandboxStatus runtime.Availability) {
	events, podEvents = runtime.Supported, runtime.Supported
	if !spec.HasEvents() {
		// No event arrives to show what events carry.
		events, podEvents = runtime.Unsupported, runtime.Unknown
	}
	streaming, sandboxStatus = runtime.Unsupported, runtime.Unsupported
	switch {
	case spec.Kind == runtimetest.CRIO:
		streaming = runtime.Supported
		if !spec.NoPodEvents {
			sandboxStatus = runtime.Supported
		}
	case minor(spec.Version) >= 4:
		// Measured: containerd 2.0 to 2.3 answer Unimplemented.
		streaming = runtime.Supported
	}
	return events, podEvents, streaming, sandboxStatus
}

// minor is the minor version of a containerd 2.x version, or -1.
func minor(v string) int {
	var minor, patch int
	if _, err := fmt.Sscanf(v, "v2.%d.%d", &minor, &patch); err != nil {
		return -1
	}
	return minor
}

// TestCapabilities: what Detect finds on each runtime is what it is known
// to have, and the generator's own calls teach the adapter the same.
func TestCapabilities(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		pod := newPod("caps")
		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		_, err = in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)

		rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
		must(t, err)
		defer rt.Close()
		caps, err := rt.Detect(ctx(t))
		must(t, err)
		t.Logf("%s:\n  %s", in.Spec, strings.Join(caps.Lines(), "\n  "))

		events, podEvents, streaming, sandboxStatus := wantCapabilities(in.Spec)
		if caps.RuntimeName != runtimeName(in.Spec) {
			t.Errorf("runtime name %q", caps.RuntimeName)
		}
		for _, c := range []struct {
			what string
			got  runtime.Capability
			want runtime.Availability
		}{
			{"event stream", caps.ContainerEvents, events},
			{"streaming lists", caps.StreamingLists, streaming},
			{"container statuses in PodSandboxStatus", caps.SandboxStatusContainers, sandboxStatus},
		} {
			if c.got.Availability != c.want {
				t.Errorf("%s: %s %s, want %s", in.Spec, c.what, c.got, c.want)
			}
		}
		// containerd 2.0.0 to 2.0.2 set the Timestamp alone.
		var patch int
		_, err = fmt.Sscanf(in.Spec.Version, "v2.0.%d", &patch)
		if timestampOnly := in.Spec.Kind == runtimetest.Containerd && err == nil && patch <= 2; timestampOnly !=
			(caps.SandboxStatusContainers.Detail == "Timestamp set without ContainersStatuses") {
			t.Errorf("%s: PodSandboxStatus %s", in.Spec, caps.SandboxStatusContainers)
		}
		// An event arrives during the probe only if there was one to
		// send: a backlog, say.
		if caps.PodEvents.Availability != podEvents && caps.PodEvents.Availability != runtime.Unknown {
			t.Errorf("%s: pod events %s, want %s", in.Spec, caps.PodEvents, podEvents)
		}
		l := caps.Lists
		if l.PodSandboxes.Items == 0 || l.Containers.Items == 0 || l.Containers.Streamed != (streaming == runtime.Supported) || l.LimitBytes != cri.DefaultMaxRecvMsgSize {
			t.Errorf("%s: list sizes %+v", in.Spec, l)
		}

		// A generator over the adapter teaches it the same, without
		// asking: by the time it saw the pod start, its calls showed all
		// but what events carry, which shows once an event arrives.
		w := watchRuntime(t, rt, pleg.Options{})
		other, err := in.RunPod(ctx(t), newPod("caps-later"))
		must(t, err)
		wait(t, "the later pod seen", func() bool {
			for _, ev := range w.all() {
				if ev.ContainerID == other {
					return true
				}
			}
			return false
		})
		learned := rt.Capabilities()
		if learned.StreamingLists.Availability != streaming || learned.SandboxStatusContainers.Availability != sandboxStatus {
			t.Errorf("%s: learned %+v", in.Spec, learned)
		}
		if podEvents == runtime.Supported {
			wait(t, "the events to show they carry the pod", func() bool {
				return rt.Capabilities().PodEvents.Availability == runtime.Supported
			})
		}
		wait(t, "the event stream to show", func() bool { return rt.Capabilities().ContainerEvents.Availability == events })
	})
}

// TestBigList: a node whose whole-node container list passes the 16 MiB
// the kubelet's client accepts (containers with large annotations here;
// tens of thousands of exited containers in the field). The kubelet's
// PLEG fails every relist there for good; pleg's lists pass, streamed
// where the runtime can, and ListSizes tells how close to the limit they
// are. containerd sends no message over 16 MiB by default, streamed
// lists included (they come 5,000 items a message): the harness raises
// its max_send_message_size, as such a node must; CRI-O sends up to
// 80 MiB, its whole streamed list in one message.
func TestBigList(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		const (
			pods          = 3
			perPod        = 6
			annotationLen = 1 << 20
		)
		big := strings.Repeat("x", annotationLen)
		var uids []string
		for i := range pods {
			pod := newPod(fmt.Sprintf("big-%d", i))
			uids = append(uids, pod.UID)
			sb, err := in.RunPod(ctx(t), pod)
			must(t, err)
			t.Cleanup(func() {
				// The pods would weigh on every later test's lists.
				c, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := errors.Join(in.StopPod(c, sb), in.RemovePod(c, sb)); err != nil {
					t.Errorf("removing a big pod: %v", err)
				}
			})
			for j := range perPod {
				_, err := in.CreateContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: fmt.Sprintf("c%d", j), Args: sleeping,
					Annotations: map[string]string{"pleg.test/big": big}})
				must(t, err)
			}
		}

		// What a kubelet's client gets: the list does not fit.
		kubelet, err := cri.New(cri.Options{Endpoint: in.Endpoint, MaxRecvMsgSize: 16 << 20, DisableStreaming: true, Logger: slog.New(slog.DiscardHandler)})
		must(t, err)
		defer kubelet.Close()
		if _, err := kubelet.ListContainers(ctx(t), nil); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("%s: a whole-node list with the kubelet's 16 MiB limit: %v, want ResourceExhausted", in.Spec, err)
		}

		rt, err := cri.New(cri.Options{Endpoint: in.Endpoint, Logger: slog.New(slog.DiscardHandler)})
		must(t, err)
		defer rt.Close()
		// Relisting every second, as by default: each relist reads the
		// 18 MiB list.
		w := watchRuntime(t, rt, pleg.Options{Mode: pleg.ModeGeneric, RelistPeriod: time.Second})
		wait(t, "every big pod in the cache with its containers", func() bool {
			for _, uid := range uids {
				st, err := w.cache.Get(uid)
				if err != nil || len(st.Containers) != perPod {
					return false
				}
			}
			return true
		})
		if ok, err := w.gen.Healthy(); !ok {
			t.Errorf("unhealthy: %v", err)
		}
		sizes := rt.ListSizes()
		c := sizes.Containers
		t.Logf("%s: %s", in.Spec, sizes)
		if c.Bytes < pods*perPod*annotationLen || c.LargestMessageBytes > sizes.LimitBytes || sizes.Headroom() <= 0 || sizes.Headroom() >= 1 {
			t.Errorf("%s: list sizes %+v, headroom %.2f", in.Spec, sizes, sizes.Headroom())
		}
		_, _, streaming, _ := wantCapabilities(in.Spec)
		if c.Streamed != (streaming == runtime.Supported) {
			t.Errorf("%s: streamed %v", in.Spec, c.Streamed)
		}
	})
}
