// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
)

// ErrInspectTimeout is the error of a pod inspection that passed
// Options.InspectTimeout. It deliberately does not wrap
// context.DeadlineExceeded: a pod worker must be able to tell a pod that
// could not be inspected from its own wait being cut short.
var ErrInspectTimeout = errors.New("pod inspection deadline exceeded")

// relist is a global relist (see Relist). Callers hold relistMu.
func (g *Generator) relist(ctx context.Context) error {
	st := &g.st
	start := g.clock.Now()
	st.prevRelist = g.health.last()
	if last := st.prevRelist; !last.IsZero() {
		g.metrics.RelistInterval.Observe(start.Sub(last).Seconds())
	}
	g.health.relistStarted(start)
	g.metrics.RelistInFlight.Set(1)
	g.metrics.RelistStarted.Set(float64(start.UnixNano()) / 1e9)
	defer func() {
		g.metrics.ObserveRelist(g.clock.Since(start).Seconds())
		g.metrics.RelistInFlight.Set(0)
		g.health.relistDone()
	}()

	sandboxes, containers, moved, err := g.listAll(ctx, start)
	if err != nil {
		return err
	}
	g.health.relisted(start)
	g.metrics.LastSeen.Set(float64(start.Unix()))
	if g.streamConnected() && st.startsUntold(containers) {
		g.stream.AwaitBacklog(ctx, stream.BacklogDue)
	}
	g.absorbEvents("")

	st.group(sandboxes, containers, "", g.streamConnected())
	running, byState := st.running()
	g.metrics.RunningPods.Set(float64(running))
	g.metrics.SetRunningContainers(byState[0], byState[1], byState[2], byState[3])

	// Requests for pods the list does not hold are dropped with them.
	reinspect := g.reinspect.takeAll()
	work := st.plan(reinspect, g.conditions.pods(), moved, start)
	g.leaveMoved(moved, reinspect)
	g.conditions.retain(func(uid string) bool {
		rec, ok := st.records[uid]
		return ok && rec.listedPass == st.pass
	})

	g.reconcileAll(ctx, work, start)

	for _, w := range work {
		if w.gone {
			delete(st.records, w.rec.uid)
		}
	}
	st.invalid.forgetBefore(st.pass)
	st.hints.prune(start, func(uid, id string) bool {
		rec, ok := st.records[uid]
		return ok && (rec.knows(id, false) || rec.knows(id, true))
	})
	st.dropListItems()
	if err := ctx.Err(); err != nil {
		// Stopped: some pods were not written, so the cache cannot claim
		// that every entry is as new as start.
		return err
	}
	// Every pod written above was observed at start or later.
	g.cache.UpdateTime(start)
	st.catchingUp = false
	return nil
}

// podList is what a pod's lists returned, for podListed.
type podList struct {
	uid   string
	start time.Time
	// lastGlobal is the start of the latest successful global relist when
	// the lists began: one that started since has seen the pod after them.
	lastGlobal time.Time
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	err        error
}

// podInspection is a pod's relist waiting for, or holding, its inspection.
type podInspection struct {
	list podList
	w    podWork
	in   inspection
}

// listPod lists pod's items; it touches no relist state. A pod's relist
// runs in steps: listPod, then podListed under relistMu, then, if the pod
// changed, its inspection, then podInspected under relistMu. The two steps
// that wait on the runtime run without relistMu, so the relist loop goes
// on applying other pods' events meanwhile (relistState.listing keeps the
// pod's own events out).
func (g *Generator) listPod(ctx context.Context, uid string) podList {
	l := podList{uid: uid, start: g.clock.Now(), lastGlobal: g.health.last()}
	l.sandboxes, l.containers, l.err = g.list(ctx, l.start, uid)
	return l
}

// podListed reconciles a pod's record with what its lists returned. It
// returns the pod's inspection to run if it changed, or finishes the
// relist and returns nil. Callers hold relistMu.
func (g *Generator) podListed(ctx context.Context, l podList) *podInspection {
	st := &g.st
	uid, start := l.uid, l.start
	if g.listsOvertaken(l) {
		g.podRelisted(l, false, false)
		return nil
	}
	if l.err != nil {
		g.retryRelist(uid, false)
	}
	if l.err != nil || !g.health.last().Equal(l.lastGlobal) {
		// Failed: the next global relist will see the pod. Or a caller's
		// Relist listed every pod after these lists began, which served
		// the request and may be newer than them.
		g.podRelisted(l, false, false)
		return nil
	}
	st.prevRelist = l.lastGlobal
	g.absorbEvents(uid)
	st.group(l.sandboxes, l.containers, uid, g.streamConnected())

	rec, known := st.records[uid]
	if !known {
		// Not listed now nor before; the stream may still know of it.
		rec = &podRecord{uid: uid}
	}
	gone := rec.listedPass != st.pass
	if gone {
		rec.vanish()
		g.conditions.drop(uid)
	}
	w, ok := workFor(rec, gone, g.reinspect.take(uid), g.conditions.has(uid), st.hints.take(uid, rec.sees, start))
	if !ok || (!known && len(w.transitions) == 0) {
		g.podRelisted(l, ctx.Err() == nil, gone)
		return nil
	}
	if !gone {
		w.pod = rec.pod()
	}
	return &podInspection{list: l, w: w}
}

// podInspected applies a pod's inspection and finishes its relist.
// Callers hold relistMu.
func (g *Generator) podInspected(ctx context.Context, pi *podInspection) {
	if !g.health.last().Equal(pi.list.lastGlobal) {
		// A caller's Relist came in between, as in podListed.
		g.podRelisted(pi.list, false, false)
		return
	}
	g.apply(ctx, &pi.w, pi.in, pi.list.start, &g.single)
	g.flush(&g.single)
	g.podRelisted(pi.list, ctx.Err() == nil, pi.w.gone)
}

// podRelisted ends a pod's relist: the record of a pod gone is dropped,
// the records' list items are let go and, if it observed the pod, those
// waiting for the pod are released even when nothing changed. Callers hold
// relistMu.
func (g *Generator) podRelisted(l podList, observed, gone bool) {
	st := &g.st
	st.listing, st.listingBack, st.listingOvertaken = "", false, false
	defer g.applyDeferred()
	g.metrics.PodRelists.Inc()
	g.metrics.PodRelistDuration.Observe(g.clock.Since(l.start).Seconds())
	if gone {
		delete(st.records, l.uid)
	}
	st.dropListItems()
	if observed {
		g.cache.SetObservedTime(l.uid, l.start)
	}
}

// list returns the runtime's sandboxes and containers, of pod only if set.
// A runtime that is down fails every list, global or of one pod: the first
// failure is logged as an error, the next ones at debug level until a list
// succeeds again.
func (g *Generator) list(
	ctx context.Context,
	start time.Time,
	pod string,
) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	var sf *runtimeapi.PodSandboxFilter
	var cf *runtimeapi.ContainerFilter
	if pod != "" {
		sf, cf = runtime.PodSandboxFilterForPod(pod), runtime.ContainerFilterForPod(pod)
	}
	sandboxes, containers, err := g.listBoth(ctx, sf, cf)
	if err != nil {
		g.listFailed(ctx, start, pod, err)
		return nil, nil, err
	}
	if _, since := g.health.listed(start, nil); !since.IsZero() {
		g.log.Info("GenericPLEG: Runtime answers again", "failedFor", start.Sub(since))
		if g.stream != nil {
			// Its event stream very likely does too: the backoff grown
			// meanwhile would keep the stream down long after.
			g.stream.RetryNow()
		}
	}
	return sandboxes, containers, nil
}

// listBoth lists sandboxes and containers at once, as if the sandboxes
// were listed first. Order matters: a sandbox is removed after its
// containers, so a sandbox list made first misses no sandbox a container
// of the list after it needs. Made together, the container list may be the
// older one and hold a container whose sandbox, removed meanwhile, the
// sandbox list no longer has: its pod's removal would come out of order.
// Such a container is the one sign of it, and the containers are then
// listed again, after the sandboxes. A new pod's container can look the
// same (its sandbox made after the sandbox list): listing again then costs
// one list, and is as right as the first.
func (g *Generator) listBoth(
	ctx context.Context,
	sf *runtimeapi.PodSandboxFilter,
	cf *runtimeapi.ContainerFilter,
) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	var sandboxes []*runtimeapi.PodSandbox
	var serr error
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		sandboxes, serr = g.rt.ListPodSandbox(ctx, sf)
	}()
	containers, cerr := g.rt.ListContainers(ctx, cf)
	<-listed
	if serr != nil {
		return nil, nil, fmt.Errorf("listing pod sandboxes: %w", serr)
	}
	if cerr == nil && withoutSandbox(sandboxes, containers) {
		containers, cerr = g.rt.ListContainers(ctx, cf)
	}
	if cerr != nil {
		return nil, nil, fmt.Errorf("listing containers: %w", cerr)
	}
	return sandboxes, containers, nil
}

// withoutSandbox reports whether a container's sandbox is not among
// sandboxes.
func withoutSandbox(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) bool {
	ids := make(map[string]struct{}, len(sandboxes))
	for _, sb := range sandboxes {
		ids[sb.GetId()] = struct{}{}
	}
	for _, c := range containers {
		if _, ok := ids[c.GetPodSandboxId()]; !ok {
			return true
		}
	}
	return false
}

// listFailed records and logs a failed list, unless ctx ended.
func (g *Generator) listFailed(ctx context.Context, start time.Time, pod string, err error) {
	if ctx.Err() != nil {
		return
	}
	first, _ := g.health.listed(start, err)
	level := slog.LevelDebug
	if first {
		level = slog.LevelError
	}
	if pod == "" {
		g.log.Log(ctx, level, "GenericPLEG: Unable to retrieve pods", "err", err, "failingSince", g.health.ListFailingSince())
	} else {
		g.log.Log(ctx, level, "GenericPLEG: Unable to retrieve pod", "pod", pod, "err", err,
			"failingSince", g.health.ListFailingSince())
	}
}

// inspection is what the runtime said of one pod.
type inspection struct {
	status *runtime.PodStatus
	err    error
}

// reconcileAll reconciles work: InspectConcurrency workers inspect the
// pods, and this goroutine applies each inspection as it comes, so that
// the cache, the records and the events have one writer. With a
// concurrency of 1 it reconciles pod after pod, delivering each pod's
// events before inspecting the next, as the kubelet does. Callers hold
// relistMu.
func (g *Generator) reconcileAll(ctx context.Context, work []podWork, observed time.Time) {
	for i := range work {
		if !work[i].gone {
			work[i].pod = work[i].rec.pod()
		}
	}
	out := &g.relisted
	workers := min(g.opts.InspectConcurrency, len(work))
	if workers <= 1 {
		for i := range work {
			g.apply(ctx, &work[i], g.inspectWork(ctx, &work[i]), observed, out)
			g.flush(out)
		}
		return
	}
	type done struct {
		w  *podWork
		in inspection
	}
	next := make(chan *podWork)
	results := make(chan done, len(work))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w := range next {
				results <- done{w, g.inspectWork(ctx, w)}
			}
		})
	}
	go func() {
		for i := range work {
			next <- &work[i]
		}
		close(next)
		wg.Wait()
		close(results)
	}()
	for d := range results {
		g.apply(ctx, d.w, d.in, observed, out)
		if len(results) == 0 {
			// Nothing more inspected yet: deliver what is, with one commit.
			g.flush(out)
		}
	}
	g.flush(out)
}

// inspectWork asks the runtime for the status of a pod that is not gone,
// within InspectTimeout. It runs on an inspection worker and touches
// nothing but w.pod.
func (g *Generator) inspectWork(ctx context.Context, w *podWork) inspection {
	if w.gone {
		return inspection{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := g.clock.AfterFunc(g.opts.InspectTimeout, func() {
		cancel(fmt.Errorf("%w after %v", ErrInspectTimeout, g.opts.InspectTimeout))
	})
	defer deadline.Stop()

	start := g.clock.Now()
	status, err := runtime.InspectPod(ctx, g.rt, w.pod)
	g.metrics.InspectionDuration.Observe(g.clock.Since(start).Seconds())
	return inspection{status, err}
}

// apply takes a pod's inspection: the change it confirms leaves by emit,
// into out. If the pod could not be inspected, its record stays where it
// was, so the next relist finds the same changes and tries again; the
// kubelet does the same and drops the events meanwhile. Callers hold
// relistMu.
func (g *Generator) apply(ctx context.Context, w *podWork, in inspection, observed time.Time, out *outbox) {
	rec := w.rec
	switch {
	case w.gone:
		g.health.podInspected(rec.uid)
	case in.err != nil && ctx.Err() != nil:
		// Stopped mid-inspection: not the pod's fault, nothing to cache.
		g.reinspect.add(rec.uid)
		return
	case in.err != nil:
		g.inspectionFailed(rec.ref(), in.err, observed)
		if g.cache.Set(rec.uid, in.status, in.err, observed) {
			rec.modified = observed
		}
		g.reinspect.add(rec.uid)
		return
	default:
		if g.health.podInspected(rec.uid) {
			g.log.Info("PLEG: Pod can be inspected again", "pod", rec.namespace+"/"+rec.name, "podUID", rec.uid)
		}
	}
	u := podUpdate{
		rec:      rec,
		status:   in.status,
		cachedAt: observed,
		change: &podChange{
			podRef:      rec.ref(),
			observed:    observed,
			transitions: w.transitions,
			podSync:     len(w.transitions) == 0 && w.reinspect,
		},
		untold: w.untold,
	}
	if !g.emit(out, &u) {
		// The cache holds a newer status than this observation: the next
		// relist brings a fresh one.
		return
	}
	if w.shortLived > 0 {
		g.metrics.ShortLivedEvents.Add(float64(w.shortLived))
	}
}

// inspectionFailed counts a failed inspection and logs it: a warning when
// the pod starts failing, then at debug level, since a pod the runtime
// cannot answer for fails again every relist.
func (g *Generator) inspectionFailed(ref podRef, err error, at time.Time) {
	reason := metrics.InspectionError
	deadline := errors.Is(err, ErrInspectTimeout)
	if deadline {
		reason = metrics.InspectionDeadline
	}
	g.metrics.InspectionFailures.WithLabelValues(reason).Inc()
	g.retryRelist(ref.uid, deadline)
	level := slog.LevelDebug
	if g.health.podFailed(ref, at, deadline, err) {
		level = slog.LevelWarn
	}
	g.log.Log(context.Background(), level, "PLEG: Ignoring events for pod; it will be inspected again at the next relist",
		"pod", ref.namespace+"/"+ref.name, "podUID", ref.uid, "err", err)
}

// listAll lists every sandbox and container for a global relist. While
// the runtime answers, the events that come are handled as ever, their
// payloads applied at once: the relist would otherwise hold them up for as
// long as the runtime takes to list the node, under load hundreds of
// milliseconds, and then take them as hints, for inspections. It returns
// the pods whose records payloads moved meanwhile: what the lists say of
// them may be older than the payloads, so the relist leaves them to
// relists of their own. Callers hold relistMu.
func (g *Generator) listAll(
	ctx context.Context,
	start time.Time,
) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, map[string]struct{}, error) {
	if g.stream == nil {
		sandboxes, containers, err := g.list(ctx, start, "")
		return sandboxes, containers, nil, err
	}
	type lists struct {
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		err        error
	}
	done := make(chan lists, 1)
	go func() {
		// It touches no relist state: list only logs and tells health.
		var l lists
		l.sandboxes, l.containers, l.err = g.list(ctx, start, "")
		done <- l
	}()
	st := &g.st
	st.moved = make(map[string]struct{})
	defer func() { st.moved = nil }()
	for {
		select {
		case l := <-done:
			g.handleEvents() // those that came as it answered
			return l.sandboxes, l.containers, st.moved, l.err
		case <-g.events.ready:
			g.handleEvents()
		}
	}
}

// leaveMoved asks for relists of the pods a global relist left alone, as
// payloads moved them while it listed, with the re-inspections asked for
// them (reinspect). Callers hold relistMu.
func (g *Generator) leaveMoved(moved, reinspect map[string]struct{}) {
	now := g.clock.Now()
	for uid := range moved {
		if _, ok := reinspect[uid]; ok {
			g.reinspect.add(uid)
		}
		g.requests.add(uid, now)
	}
}

// listsOvertaken reports whether a payload was applied to the pod of l
// while its lists were in flight: they may be older than the payload, and
// a record moved by it must not be compared with them. Then they are
// thrown away and the pod relisted afresh, its events reported already.
// Else the lists are back, and the pod's own events wait for its relist
// to end. Callers hold relistMu.
func (g *Generator) listsOvertaken(l podList) bool {
	st := &g.st
	if l.uid != st.listing {
		return false
	}
	if st.listingOvertaken {
		g.requests.add(l.uid, g.clock.Now())
		return true
	}
	st.listingBack = true
	return false
}
