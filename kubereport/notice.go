// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/plegkit/pleg"
)

// The events' reasons. On the node: the list failures take the
// condition's reasons (RuntimeUnreachable, ListTooLarge, RelistFailing);
// these are the others.
const (
	ReasonRelistRecovered        = "RelistRecovered"
	ReasonEventStreamLost        = "EventStreamLost"
	ReasonEventStreamRestored    = "EventStreamRestored"
	ReasonEventStreamUnsupported = "EventStreamUnsupported"
	// On a pod: ReasonPodStatusHung, and this.
	ReasonPodInspectionFailing = "PodInspectionFailing"
)

// The events' actions: what pleg was doing about the object.
const (
	actionRelist  = "Relist"
	actionWatch   = "WatchContainerEvents"
	actionInspect = "InspectPod"
)

// event is one Kubernetes event to record.
type event struct {
	regarding *corev1.ObjectReference
	warning   bool
	reason    string
	action    string
	note      string
}

func (e event) eventType() string {
	if e.warning {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// notices decides the events from successive statuses. It remembers what
// it told so that a problem is told once when it starts and, on the node,
// once when it ends: an event per problem, never per relist or per
// container state change. Its caller owns it; it is not safe for
// concurrent use.
type notices struct {
	node  *corev1.ObjectReference
	grace time.Duration

	seen bool        // a status was seen before
	prev pleg.Status // the previous status

	// listTold is the reason told for the list failure under way, or "".
	listTold string
	// streamLost tells that a lost stream was told and not yet restored.
	streamLost bool
	// pods are the failing pods told about, by UID. A pod leaves when it
	// no longer fails, so that a new failure is told again.
	pods map[string]podTold
}

type podTold struct{ hung, failing bool }

func newNotices(nodeName string, grace time.Duration) *notices {
	return &notices{
		// kubectl describe node finds a node's events by a UID equal to
		// its name, as the kubelet writes them.
		node:  &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: types.UID(nodeName)},
		grace: grace,
		pods:  make(map[string]podTold),
	}
}

// next returns the events that st, observed at now, calls for.
func (n *notices) next(st pleg.Status, now time.Time) []event {
	var out []event
	out = n.lists(out, st, now)
	out = n.stream(out, st)
	out = n.failingPods(out, st, now)
	n.prev, n.seen = st, true
	return out
}

func (n *notices) lists(out []event, st pleg.Status, now time.Time) []event {
	failing := !st.ListFailingSince.IsZero() && now.Sub(st.ListFailingSince) >= n.grace
	switch {
	case failing && n.listTold == "":
		c := listFailure(st.ListError, st.ListFailingSince)
		n.listTold = c.reason
		out = append(out, event{regarding: n.node, warning: true, reason: c.reason, action: actionRelist, note: c.message})
	case st.ListFailingSince.IsZero() && n.listTold != "":
		n.listTold = ""
		out = append(out, event{regarding: n.node, reason: ReasonRelistRecovered, action: actionRelist,
			note: "the runtime's lists succeed again"})
	}
	return out
}

// stream tells when the container event stream falls back to relisting
// alone, and when it comes back.
func (n *notices) stream(out []event, st pleg.Status) []event {
	if st.Mode == pleg.ModeGeneric {
		return out
	}
	if st.NoStream && (!n.seen || !n.prev.NoStream) {
		// In auto mode a runtime without the stream is a normal case
		// (containerd 1.6, CRI-O without pod events); evented mode asked
		// for it.
		out = append(out, event{regarding: n.node, warning: st.Mode == pleg.ModeEvented,
			reason: ReasonEventStreamUnsupported, action: actionWatch,
			note: "the container runtime has no container event stream (GetContainerEvents); pleg relists alone"})
	}
	if st.NoStream {
		return out
	}
	switch {
	case n.seen && n.prev.StreamConnected && !st.StreamConnected:
		n.streamLost = true
		out = append(out, event{
			regarding: n.node,
			warning:   true,
			reason:    ReasonEventStreamLost,
			action:    actionWatch,
			note: "the runtime's container event stream ended (" + oneLine(st.StreamError) +
				"); pleg relists alone until it is back",
		})
	case n.streamLost && st.StreamConnected:
		n.streamLost = false
		out = append(out, event{regarding: n.node, reason: ReasonEventStreamRestored, action: actionWatch,
			note: "the runtime's container event stream is connected again"})
	}
	return out
}

// failingPods tells about a pod whose status calls pass the inspection
// deadline at once, and about one whose inspection fails otherwise once
// it has kept failing for the grace period.
func (n *notices) failingPods(out []event, st pleg.Status, now time.Time) []event {
	failing := make(map[string]bool, len(st.FailingPods))
	for _, f := range st.FailingPods {
		failing[f.UID] = true
		told := n.pods[f.UID]
		if f.Name == "" || f.Namespace == "" {
			continue // no object to write about
		}
		ref := &corev1.ObjectReference{
			APIVersion: "v1",
			Kind:       "Pod",
			Namespace:  f.Namespace,
			Name:       f.Name,
			UID:        types.UID(f.UID),
		}
		hung := f.Hung()
		switch {
		case hung && !told.hung:
			told.hung = true
			out = append(out, event{regarding: ref, warning: true, reason: ReasonPodStatusHung, action: actionInspect,
				note: fmt.Sprintf("the container runtime's status calls for this pod do not answer within pleg's inspection "+
					"deadline (since %s): %s; its pod lifecycle events wait, and the kubelet waits for each such call in every relist",
					stamp(f.Since), oneLine(f.Err))})
		case !hung && !told.failing && !told.hung && now.Sub(f.Since) >= n.grace:
			// (A pod told hung whose next try fails otherwise, as a call
			// released from its hang, is the same problem.)
			told.failing = true
			out = append(out, event{regarding: ref, warning: true, reason: ReasonPodInspectionFailing, action: actionInspect,
				note: fmt.Sprintf("the container runtime fails to report this pod's status since %s: %s; its pod lifecycle "+
					"events wait",
					stamp(f.Since), oneLine(f.Err))})
		}
		n.pods[f.UID] = told
	}
	for uid := range n.pods {
		if !failing[uid] {
			delete(n.pods, uid)
		}
	}
	return out
}
