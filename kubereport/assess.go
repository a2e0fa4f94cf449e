// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/internal/msgsize"
	"github.com/plegkit/pleg/kubeletpleg"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtimecheck"
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
	ReasonRuntimeNotReady     = "RuntimeNotReady"
	ReasonRuntimeSlow         = "RuntimeSlow"
	ReasonKubeletRelistBehind = "KubeletRelistBehind"
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

// observed is what one look shows: the generator's status, the runtime
// check's state (zero without a check) and the sizes of the runtime's
// whole-node lists.
type observed struct {
	status  pleg.Status
	runtime runtimecheck.State
	sizes   runtime.ListSizes
	// kubelet is the last reading of the kubelet's own PLEG, when
	// kubeletRead.
	kubelet     kubeletpleg.Reading
	kubeletRead bool
}

// assess turns what was observed into the condition. A list failure
// counts once it has lasted grace (a runtime restart takes a few seconds
// and puts no node at risk); a runtime call without an answer from
// runtimecheck.Unanswered, as the PlegRuntimeNotAnswering alert; a relist
// from half the threshold; a pod from the first inspection that passed
// its deadline, since the kubelet, which waits two minutes for each such
// call, is then at risk. known is false before pleg has anything to say:
// no relist succeeded yet and nothing failed.
func assess(o observed, now time.Time, grace time.Duration) (v verdict, known bool) {
	st := o.status
	var causes []cause
	if !st.ListFailingSince.IsZero() && now.Sub(st.ListFailingSince) >= grace {
		causes = append(causes, listFailure(st.ListError, st.ListFailingSince))
	}
	if c, ok := notAnswering(o.runtime, now); ok && (len(causes) == 0 || causes[0].reason != c.reason) {
		causes = append(causes, c)
	}
	if c, ok := runtimeNotReady(o.runtime); ok {
		causes = append(causes, c)
	}
	if o.runtime.IsSlow() {
		causes = append(causes, cause{ReasonRuntimeSlow, fmt.Sprintf("the runtime answers its Status in %v, typically "+
			"(healthy: milliseconds); the kubelet marks the node NotReady once it goes 30 s without an answer",
			o.runtime.Latency.Round(10*time.Millisecond))})
	}
	if c, ok := relistAge(st, now); ok {
		causes = append(causes, c)
	}
	if c, ok := hungPods(st.FailingPods); ok {
		causes = append(causes, c)
	}
	if c, ok := kubeletBehind(o, now); ok {
		causes = append(causes, c)
	}
	if c, ok := listSize(o.sizes); ok {
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

// notAnswering reports a runtime that has gone runtimecheck.Unanswered
// without answering pleg's node-wide calls: its Status, asked as the
// kubelet asks it, or the whole-node lists. The kubelet's own runtime
// check waits on the same runtime: it turns the node NotReady a little
// over two minutes after such a hang began.
func notAnswering(rs runtimecheck.State, now time.Time) (cause, bool) {
	bad, since := rs.NotAnswering(now)
	if !bad {
		return cause{}, false
	}
	what := rs.Unanswered
	if what == "" {
		what = "pleg's calls"
	}
	msg := fmt.Sprintf("the container runtime has not answered %s since %s", what, stamp(since))
	if rs.Err != nil {
		msg += ": " + oneLine(rs.Err)
	}
	return cause{ReasonRuntimeUnreachable, msg + "; the kubelet's runtime check and relist wait on it too"}, true
}

// kubeletBehind reports the kubelet's own PLEG not seen active for half
// its threshold (kubeletpleg's BehindAfter: 90 s, 7.5 minutes with
// EventedPLEG). pleg reads it every 10 s: its last-seen then lags by no
// more than that and a scrape on a healthy node. Beside pleg's own
// relists succeeding, it says the kubelet itself is starved or stuck.
func kubeletBehind(o observed, now time.Time) (cause, bool) {
	if !o.kubeletRead || o.kubelet.LastSeen.IsZero() {
		return cause{}, false
	}
	age := now.Sub(o.kubelet.LastSeen)
	if age < o.kubelet.BehindAfter() {
		return cause{}, false
	}
	msg := fmt.Sprintf("the kubelet's own PLEG was last seen active %s ago, at %s (its kubelet_pleg_last_seen_seconds)",
		age.Round(time.Second), stamp(o.kubelet.LastSeen))
	if last := o.status.LastRelist; !last.IsZero() && now.Sub(last) < time.Minute {
		msg += fmt.Sprintf(", while pleg's relists of the same runtime succeed (the last at %s): the kubelet itself is "+
			"starved or stuck", stamp(last))
	}
	return cause{ReasonKubeletRelistBehind, msg + fmt.Sprintf("; it reports PLEG not healthy at %v",
		o.kubelet.Threshold())}, true
}

// runtimeNotReady reports a runtime that answers, and says itself not
// ready: the kubelet turns the node NotReady for it.
func runtimeNotReady(rs runtimecheck.State) (cause, bool) {
	c, ok := rs.NotReady()
	if !ok {
		return cause{}, false
	}
	return cause{ReasonRuntimeNotReady, fmt.Sprintf("the runtime reports %s=false, reason %q: %s; the kubelet marks the "+
		"node NotReady for it", c.Type, c.Reason, oneLine(errors.New(c.Message)))}, true
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
		if f.Hung() {
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
