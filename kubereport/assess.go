// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/runtime"
)

// ConditionType is the node condition pleg owns. It follows
// node-problem-detector's conventions for conditions of its own: True
// means a problem (as KernelDeadlock or ContainerRuntimeUnhealthy), the
// reason is CamelCase, the message one line. "Degraded" rather than
// "Unhealthy": it turns on before the kubelet's PLEG would be unhealthy
// (a relist halfway to the threshold, a pod whose status calls hang, lists
// near the kubelet's message limit), so that an operator sees the cause
// while the node is still Ready, and "PLEG" so that it reads next to the
// kubelet's "PLEG is not healthy".
const ConditionType corev1.NodeConditionType = "PLEGDegraded"

// The condition's reasons. Healthy is the only one with status False; the
// others are the causes, in the order in which one hides the next.
const (
	ReasonHealthy             = "PLEGIsHealthy"
	ReasonRuntimeUnreachable  = "RuntimeUnreachable"
	ReasonListTooLarge        = "ListTooLarge"
	ReasonRelistFailing       = "RelistFailing"
	ReasonRelistOverThreshold = "RelistOverThreshold"
	ReasonRelistNearThreshold = "RelistNearThreshold"
	ReasonPodStatusHung       = "PodStatusHung"
	ReasonListNearSizeLimit   = "ListNearSizeLimit"
	// ReasonStopped, with status Unknown, is what pleg leaves when it
	// stops: what it said last would otherwise read as current forever.
	ReasonStopped = "PLEGStopped"
)

// verdict is what the condition says.
type verdict struct {
	degraded bool
	stopped  bool // pleg stopped: nobody knows
	reason   string
	message  string
}

func (v verdict) status() corev1.ConditionStatus {
	switch {
	case v.stopped:
		return corev1.ConditionUnknown
	case v.degraded:
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// stopped is the verdict pleg leaves when it stops at now.
func stopped(now time.Time) verdict {
	return verdict{stopped: true, reason: ReasonStopped, message: fmt.Sprintf(
		"pleg stopped at %s: nothing reports on this node's PLEG until it runs again", now.UTC().Format(time.RFC3339))}
}

// cause is one problem found, with its place in the order.
type cause struct {
	reason, message string
}

// assess turns the generator's status into the condition. A list failure
// counts once it has lasted grace (a runtime restart takes a few seconds
// and puts no node at risk); a relist counts from half the threshold;
// a pod from the first inspection that passed its deadline, since the
// kubelet, which waits two minutes for each such call, is then at risk.
// known is false before pleg has anything to say: no relist succeeded
// yet and nothing failed.
func assess(st pleg.Status, sizes runtime.ListSizes, now time.Time, grace time.Duration) (v verdict, known bool) {
	var causes []cause
	if !st.ListFailingSince.IsZero() && now.Sub(st.ListFailingSince) >= grace {
		causes = append(causes, listFailure(st.ListError, st.ListFailingSince))
	}
	if c, ok := relistAge(st, now); ok {
		causes = append(causes, c)
	}
	if c, ok := hungPods(st.FailingPods); ok {
		causes = append(causes, c)
	}
	if c, ok := listSize(sizes); ok {
		causes = append(causes, c)
	}
	if len(causes) == 0 {
		if st.LastRelist.IsZero() {
			return verdict{}, false
		}
		return verdict{
			reason:  ReasonHealthy,
			message: "relisting keeps within its threshold and every pod's status calls answer",
		}, true
	}
	v = verdict{degraded: true, reason: causes[0].reason, message: causes[0].message}
	if len(causes) > 1 {
		also := make([]string, 0, len(causes)-1)
		for _, c := range causes[1:] {
			also = append(also, c.reason)
		}
		v.message += " (also " + strings.Join(also, ", ") + ")"
	}
	return v, true
}

// listFailure names why the runtime's lists fail.
func listFailure(err error, since time.Time) cause {
	at := stamp(since)
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return cause{
			ReasonRuntimeUnreachable,
			fmt.Sprintf("the container runtime does not answer since %s: %s", at, oneLine(err)),
		}
	case codes.ResourceExhausted:
		return cause{
			ReasonListTooLarge,
			fmt.Sprintf("the runtime's list answer is larger than the client accepts since %s: %s", at, oneLine(err)),
		}
	}
	return cause{ReasonRelistFailing, fmt.Sprintf("the runtime's lists fail since %s: %s", at, oneLine(err))}
}

// relistAge reports a relist that has not succeeded for half the
// threshold: the time since the last successful relist started, or since
// the one running started if that is older (the first relist).
func relistAge(st pleg.Status, now time.Time) (cause, bool) {
	if st.RelistThreshold <= 0 {
		return cause{}, false
	}
	since := st.LastRelist
	if since.IsZero() || (!st.RelistInFlightSince.IsZero() && st.RelistInFlightSince.Before(since)) {
		since = st.RelistInFlightSince
	}
	if since.IsZero() {
		return cause{}, false
	}
	age := now.Sub(since)
	var running string
	if !st.RelistInFlightSince.IsZero() {
		running = fmt.Sprintf("; a relist is running since %s", stamp(st.RelistInFlightSince))
	}
	last := "no relist has succeeded since " + stamp(since)
	if st.LastRelist.IsZero() {
		last = "no relist has succeeded yet"
	}
	switch {
	case age >= st.RelistThreshold:
		return cause{
			ReasonRelistOverThreshold,
			fmt.Sprintf("%s%s, past the %v threshold: the kubelet's PLEG is unhealthy", last, running, st.RelistThreshold),
		}, true
	case age >= st.RelistThreshold/2:
		return cause{
			ReasonRelistNearThreshold,
			fmt.Sprintf("%s%s, over half the %v threshold", last, running, st.RelistThreshold),
		}, true
	}
	return cause{}, false
}

// hungPods reports the pods whose inspection passed its deadline, the
// oldest first.
func hungPods(failing []pleg.PodFailure) (cause, bool) {
	var hung []pleg.PodFailure
	for _, f := range failing {
		if isHung(f) {
			hung = append(hung, f)
		}
	}
	if len(hung) == 0 {
		return cause{}, false
	}
	msg := fmt.Sprintf("pod %s: its status calls do not answer within the inspection deadline since %s",
		podName(hung[0]), stamp(hung[0].Since))
	if n := len(hung) - 1; n == 1 {
		msg += "; and 1 more pod"
	} else if n > 1 {
		msg += fmt.Sprintf("; and %d more pods", n)
	}
	return cause{ReasonPodStatusHung, msg + "; the kubelet waits for each such call in every relist"}, true
}

// listSize reports a whole-node list near a limit: the kubelet's 16 MiB,
// which its unary lists receive as one message, or the runtime client's
// own, for the largest message it received.
func listSize(s runtime.ListSizes) (cause, bool) {
	op, l := "ListContainers", s.Containers
	if s.PodSandboxes.Bytes > l.Bytes {
		op, l = "ListPodSandbox", s.PodSandboxes
	}
	size, limit, whose := l.Bytes, msgsize.KubeletMax, "the kubelet's"
	if s.LimitBytes > 0 && float64(l.LargestMessageBytes)/float64(s.LimitBytes) > float64(size)/float64(limit) {
		size, limit, whose = l.LargestMessageBytes, s.LimitBytes, "pleg's receive"
	}
	if float64(size) < msgsize.Near*float64(limit) {
		return cause{}, false
	}
	return cause{ReasonListNearSizeLimit, fmt.Sprintf("the %s answer is %s, %d%% of %s %s limit; past it every relist "+
		"fails",
		op, msgsize.MiB(size, 1), 100*size/limit, whose, msgsize.MiB(limit, 1))}, true
}

// isHung tells a pod whose status calls do not answer: its inspection
// passed pleg's deadline, or a call passed its own (the runtime client's
// request timeout, when that is the shorter).
func isHung(f pleg.PodFailure) bool {
	return f.Deadline || status.Code(f.Err) == codes.DeadlineExceeded
}

func podName(f pleg.PodFailure) string {
	if f.Name == "" {
		return f.UID
	}
	return f.Namespace + "/" + f.Name
}

// stamp is a time as a message shows it: UTC, to the second, so that a
// message changes only when what it says changes.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// maxErrLen bounds an error inside a message: an event's note holds 1 KiB.
const maxErrLen = 300

// oneLine is err's text on one line, cut to maxErrLen.
func oneLine(err error) string {
	if err == nil {
		return "unknown error"
	}
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > maxErrLen {
		s = strings.ToValidUTF8(s[:maxErrLen], "") + "..."
	}
	return s
}
