package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
)

// ErrInspectTimeout is the error of a pod inspection that passed
// Options.InspectTimeout. It deliberately does not wrap
// context.DeadlineExceeded: a pod worker must be able to tell a pod that
// could not be inspected from its own wait being cut short.
var ErrInspectTimeout = errors.New("pod inspection deadline exceeded")

// Relist lists the runtime once and reconciles every pod: it delivers the
// events of the pods whose containers changed, after writing their fresh
// status to the cache, re-inspects the pods whose last inspection failed or
// that were asked for, and then stamps the cache's global time. It returns
// the list error, the only one that fails a relist; a pod whose inspection
// fails is retried at the next relist.
func (g *Generator) Relist(ctx context.Context) error {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()

	start := g.clock.Now()
	if last := g.lastRelist(); !last.IsZero() {
		g.metrics.RelistInterval.Observe(start.Sub(last).Seconds())
	}
	g.metrics.RelistInFlight.Set(1)
	g.metrics.RelistStarted.Set(float64(start.UnixNano()) / 1e9)
	defer func() {
		g.metrics.RelistDuration.Observe(g.clock.Since(start).Seconds())
		g.metrics.RelistInFlight.Set(0)
	}()

	sandboxes, containers, err := g.list(ctx, nil, nil)
	if err != nil {
		if ctx.Err() == nil {
			// A runtime that is down fails every relist: say it once
			// loudly, then quietly until it answers again.
			level := slog.LevelDebug
			if g.listFailingSince.IsZero() {
				g.listFailingSince, level = start, slog.LevelError
			}
			g.log.Log(ctx, level, "GenericPLEG: Unable to retrieve pods", "err", err, "failingSince", g.listFailingSince)
		}
		return err
	}
	if !g.listFailingSince.IsZero() {
		g.log.Info("GenericPLEG: Runtime answers again", "failedFor", start.Sub(g.listFailingSince))
		g.listFailingSince = time.Time{}
	}
	g.relistTime.Store(&start)
	g.metrics.LastSeen.Set(float64(start.Unix()))

	g.pass++
	g.group(sandboxes, containers, "")
	g.updateRunningMetrics()

	// Requests for pods the list does not hold are dropped with them.
	reinspect := g.reinspect.takeAll()
	watched := g.conditions.pods()
	pending := g.hints.hinted()
	hints := func(rec *podRecord) hinted {
		if _, ok := pending[rec.uid]; !ok {
			return hinted{}
		}
		delete(pending, rec.uid)
		return g.takeHints(rec, start)
	}
	var work []podWork
	for _, rec := range g.listed {
		_, flagged := reinspect[rec.uid]
		_, hasConditions := watched[rec.uid]
		if w, ok := workFor(rec, false, flagged, hasConditions, hints(rec)); ok {
			work = append(work, w)
		}
	}
	for _, rec := range g.records {
		if rec.listed != g.pass {
			rec.vanish()
			_, flagged := reinspect[rec.uid]
			w, _ := workFor(rec, true, flagged, false, hints(rec))
			work = append(work, w)
		}
	}
	// Pods the stream reported that no list has held: born and gone in
	// between.
	for uid, ph := range pending {
		rec := &podRecord{uid: uid, name: ph.name, namespace: ph.namespace}
		if h := g.takeHints(rec, start); len(h.extra) > 0 {
			work = append(work, podWork{rec: rec, gone: true, transitions: h.extra})
		}
	}
	g.conditions.retain(func(uid string) bool {
		rec, ok := g.records[uid]
		return ok && rec.listed == g.pass
	})

	g.reconcileAll(ctx, work, start)

	for _, w := range work {
		if w.gone {
			delete(g.records, w.rec.uid)
		}
	}
	g.invalid.forgetBefore(g.pass)
	g.hints.prune(start)
	g.dropListItems()
	if err := ctx.Err(); err != nil {
		// Stopped: some pods were not written, so the cache cannot claim
		// that every entry is as new as start.
		return err
	}
	// Every pod written above was observed at start or later.
	g.cache.UpdateTime(start)
	return nil
}

// relistPod lists and reconciles one pod, leaving the others alone.
func (g *Generator) relistPod(ctx context.Context, uid string) {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()

	start := g.clock.Now()
	g.metrics.PodRelists.Inc()
	defer func() { g.metrics.PodRelistDuration.Observe(g.clock.Since(start).Seconds()) }()

	sandboxes, containers, err := g.list(ctx, runtime.PodSandboxFilterForPod(uid), runtime.ContainerFilterForPod(uid))
	if err != nil {
		// The next global relist will see the pod.
		if ctx.Err() == nil {
			g.log.Error("GenericPLEG: Unable to retrieve pod", "pod", uid, "err", err)
		}
		return
	}
	g.pass++
	g.group(sandboxes, containers, uid)

	rec, known := g.records[uid]
	if !known {
		// Not listed now nor before; the stream may still know of it.
		rec = &podRecord{uid: uid}
	}
	gone := rec.listed != g.pass
	if gone {
		rec.vanish()
		g.conditions.drop(uid)
	}
	if w, ok := workFor(rec, gone, g.reinspect.take(uid), g.conditions.has(uid), g.takeHints(rec, start)); ok && (known || len(w.transitions) > 0) {
		g.reconcileAll(ctx, []podWork{w}, start)
	}
	if gone {
		delete(g.records, uid)
	}
	g.dropListItems()
	if ctx.Err() != nil {
		return
	}
	// Release those waiting for the pod even when nothing changed.
	g.cache.SetObservedTime(uid, start)
}

// dropListItems lets go of the list items the records point to, which
// only inspection needed: until the next relist, the whole list would
// stay in memory for nothing (at 10,000 pods, over 100 MB).
func (g *Generator) dropListItems() {
	for _, rec := range g.listed {
		for i := range rec.cur {
			rec.cur[i].sb, rec.cur[i].c = nil, nil
		}
	}
}

// list returns the runtime's sandboxes and containers.
func (g *Generator) list(ctx context.Context, sf *runtimeapi.PodSandboxFilter, cf *runtimeapi.ContainerFilter) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	sandboxes, err := g.rt.ListPodSandbox(ctx, sf)
	if err != nil {
		return nil, nil, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	containers, err := g.rt.ListContainers(ctx, cf)
	if err != nil {
		return nil, nil, fmt.Errorf("listing containers: %w", err)
	}
	return sandboxes, containers, nil
}

// group sorts the listed sandboxes and containers into pod records, as
// list pass g.pass. With only set, items of other pods are ignored. After
// it, g.listed holds the records the lists saw, in list order.
func (g *Generator) group(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, only string) {
	g.listed = g.listed[:0]
	g.last = nil
	for _, sb := range sandboxes {
		switch {
		case sb == nil:
			g.invalid.report(g.pass, invalidNilItem, "sandbox", "")
			continue
		case sb.Id == "":
			g.invalid.report(g.pass, invalidEmptyID, "sandbox", "", "pod", sb.GetMetadata().GetUid())
			continue
		case sb.Metadata == nil || sb.Metadata.Uid == "":
			g.invalid.report(g.pass, invalidNilMetadata, "sandbox", sb.Id)
			continue
		}
		md := sb.Metadata
		if only != "" && md.Uid != only {
			continue
		}
		st, ok := sandboxState(sb.State)
		if !ok {
			g.invalid.report(g.pass, invalidUnknownState, "sandbox", sb.Id, "pod", md.Uid, "state", int32(sb.State))
		}
		rec := g.record(md.Uid, md.Name, md.Namespace)
		rec.cur = append(rec.cur, entry{id: sb.Id, state: st, sandbox: true, sb: sb})
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			rec.runningSandbox = true
		}
	}

	indexed := false
	for _, c := range containers {
		switch {
		case c == nil:
			g.invalid.report(g.pass, invalidNilItem, "container", "")
			continue
		case c.Id == "":
			g.invalid.report(g.pass, invalidEmptyID, "container", "", "sandbox", c.PodSandboxId)
			continue
		}
		uid := c.Labels[runtime.PodUIDLabel]
		if uid == "" {
			// The kubelet files such containers under an empty pod UID.
			// Their sandbox knows their pod.
			if !indexed {
				g.indexSandboxes(sandboxes)
				indexed = true
			}
			uid = g.sandboxPods[c.PodSandboxId]
			if uid == "" {
				g.invalid.report(g.pass, invalidNoPod, "container", c.Id, "sandbox", c.PodSandboxId)
				continue
			}
		}
		if only != "" && uid != only {
			continue
		}
		name := c.GetMetadata().GetName()
		if c.Metadata == nil {
			name = c.Labels[runtime.ContainerNameLabel]
			g.invalid.report(g.pass, invalidNilMetadata, "container", c.Id, "pod", uid)
		}
		st, ok := containerState(c.State)
		if !ok {
			g.invalid.report(g.pass, invalidUnknownState, "container", c.Id, "pod", uid, "state", int32(c.State))
		}
		rec := g.record(uid, c.Labels[runtime.PodNameLabel], c.Labels[runtime.PodNamespaceLabel])
		rec.cur = append(rec.cur, entry{id: c.Id, name: name, state: st, c: c})
	}

	for _, rec := range g.listed {
		for _, id := range rec.finishListing() {
			g.invalid.report(g.pass, invalidDuplicateID, "item", id, "pod", rec.uid)
		}
	}
}

// record returns the record of pod uid for the current list pass, creating
// it for a pod not seen before, and checks that the pod keeps one name.
func (g *Generator) record(uid, name, namespace string) *podRecord {
	// Runtimes tend to list a pod's items together: skip the map then.
	rec := g.last
	if rec == nil || rec.uid != uid {
		var ok bool
		if rec, ok = g.records[uid]; !ok {
			rec = &podRecord{uid: uid}
			g.records[uid] = rec
		}
		g.last = rec
	}
	if rec.listed != g.pass {
		rec.startListing(g.pass)
		g.listed = append(g.listed, rec)
	}
	switch {
	case rec.name == "" && rec.namespace == "":
		rec.name, rec.namespace = name, namespace
	case name != "" && (name != rec.name || namespace != rec.namespace):
		g.invalid.report(g.pass, invalidPodNameConflict, "pod", uid, "name", rec.namespace+"/"+rec.name, "otherName", namespace+"/"+name)
	}
	return rec
}

func (g *Generator) indexSandboxes(sandboxes []*runtimeapi.PodSandbox) {
	clear(g.sandboxPods)
	for _, sb := range sandboxes {
		if uid := sb.GetMetadata().GetUid(); uid != "" && sb.GetId() != "" {
			g.sandboxPods[sb.Id] = uid
		}
	}
}

// updateRunningMetrics sets kubelet_running_pods (pods with a ready
// sandbox) and kubelet_running_containers (containers by CRI state).
func (g *Generator) updateRunningMetrics() {
	running := 0
	var counts [4]int
	for _, rec := range g.listed {
		if rec.runningSandbox {
			running++
		}
		for _, e := range rec.cur {
			if e.c == nil {
				continue
			}
			switch s := e.c.State; s {
			case runtimeapi.ContainerState_CONTAINER_CREATED, runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED:
				counts[s]++
			default:
				counts[runtimeapi.ContainerState_CONTAINER_UNKNOWN]++
			}
		}
	}
	g.metrics.RunningPods.Set(float64(running))
	g.metrics.SetRunningContainers(counts[0], counts[1], counts[2], counts[3])
}

// podWork is a pod to reconcile.
type podWork struct {
	rec         *podRecord
	transitions []transition
	reinspect   bool
	gone        bool
}

// workFor decides whether rec needs reconciling: a container changed, the
// pod is gone, it is due for re-inspection, it has watch conditions, or
// hints report containers the lists never saw.
func workFor(rec *podRecord, gone, reinspect, hasConditions bool, h hinted) (podWork, bool) {
	w := podWork{rec: rec, gone: gone, reinspect: reinspect}
	if gone || !rec.unchanged() {
		for _, t := range rec.transitions() {
			w.transitions = append(w.transitions, expand(t, h.seen[hintKey{t.id, t.sandbox}])...)
		}
	}
	w.transitions = append(w.transitions, h.extra...)
	return w, gone || len(w.transitions) > 0 || reinspect || hasConditions
}

// hinted is what the hints about a pod add to its relist.
type hinted struct {
	// extra are the transitions of containers its record does not know.
	extra []transition
	// seen are the stages the stream reported of those it knows.
	seen map[hintKey]stage
}

// takeHints consumes the hints about rec's pod.
func (g *Generator) takeHints(rec *podRecord, now time.Time) hinted {
	var h hinted
	h.extra, h.seen = g.hints.take(rec.uid, rec.knows, now)
	for _, t := range h.extra {
		if n := deliverable(t.old, t.new); n > 0 {
			g.metrics.ShortLivedEvents.Add(float64(n))
		}
	}
	return h
}

// reconcileAll reconciles work, InspectConcurrency pods at a time. With a
// concurrency of 1 it reconciles pod after pod, delivering each pod's
// events before inspecting the next, as the kubelet does.
func (g *Generator) reconcileAll(ctx context.Context, work []podWork, observed time.Time) {
	workers := min(g.opts.InspectConcurrency, len(work))
	if workers <= 1 {
		for i := range work {
			g.reconcile(ctx, &work[i], observed)
		}
		return
	}
	next := make(chan *podWork)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w := range next {
				g.reconcile(ctx, w, observed)
			}
		})
	}
	for i := range work {
		next <- &work[i]
	}
	close(next)
	wg.Wait()
}

// reconcile brings the cache up to date with one pod, advances its record
// and delivers its events. If the pod cannot be inspected, its record stays
// where it was, so the next relist finds the same changes and tries again;
// the kubelet does the same and drops the events meanwhile.
func (g *Generator) reconcile(ctx context.Context, w *podWork, observed time.Time) {
	rec := w.rec
	var status *runtime.PodStatus
	if w.gone {
		g.cache.Delete(rec.uid)
	} else {
		var err error
		status, err = g.inspect(ctx, rec)
		switch {
		case err != nil && ctx.Err() != nil:
			// Stopped mid-inspection: not the pod's fault, nothing to cache.
			g.reinspect.add(rec.uid)
			return
		case err != nil:
			g.inspectionFailed(rec, err)
			g.cache.Set(rec.uid, status, err, observed)
			g.reinspect.add(rec.uid)
			return
		case rec.failing:
			rec.failing = false
			g.log.Info("PLEG: Pod can be inspected again", "pod", rec.namespace+"/"+rec.name, "podUID", rec.uid)
		}
		status.IPs = g.podIPs(rec.uid, status)
		if !g.cache.Set(rec.uid, status, nil, observed) {
			// The cache holds a newer status than this observation: the
			// next relist brings a fresh one.
			return
		}
	}

	change := &podChange{
		podRef:      podRef{uid: rec.uid, name: rec.name, namespace: rec.namespace},
		observed:    observed,
		transitions: w.transitions,
		podSync:     len(w.transitions) == 0 && w.reinspect,
	}
	if !w.gone {
		change.conditionMet = g.conditions.evaluate(rec.uid, status)
	}
	rec.advance()
	if g.source != nil {
		// A late DELETED must not report these again.
		g.hints.tombstone(w.transitions, observed)
	}
	if len(change.transitions) == 0 && !change.podSync && !change.conditionMet {
		return
	}
	for _, t := range w.transitions {
		g.log.Debug("GenericPLEG", "podUID", rec.uid, "containerID", t.id, "sandbox", t.sandbox, "oldState", t.old, "newState", t.new)
		if t.new == stateExited && status != nil {
			if c := status.FindContainerByID(t.id); c != nil {
				g.log.Debug("Generic (PLEG): container finished", "podID", rec.uid, "containerID", t.id, "exitCode", c.GetExitCode())
			}
		}
	}
	g.out.publish(change)
}

// inspect asks the runtime for the pod's status within InspectTimeout.
func (g *Generator) inspect(ctx context.Context, rec *podRecord) (*runtime.PodStatus, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := g.clock.AfterFunc(g.opts.InspectTimeout, func() {
		cancel(fmt.Errorf("%w after %v", ErrInspectTimeout, g.opts.InspectTimeout))
	})
	defer deadline.Stop()

	start := g.clock.Now()
	status, err := runtime.InspectPod(ctx, g.rt, rec.pod())
	g.metrics.InspectionDuration.Observe(g.clock.Since(start).Seconds())
	return status, err
}

// inspectionFailed counts a failed inspection and logs it: a warning when
// the pod starts failing, then quietly, since a pod the runtime cannot
// answer for fails again every relist.
func (g *Generator) inspectionFailed(rec *podRecord, err error) {
	reason := metrics.InspectionError
	if errors.Is(err, ErrInspectTimeout) {
		reason = metrics.InspectionDeadline
	}
	g.metrics.InspectionFailures.WithLabelValues(reason).Inc()
	level := slog.LevelDebug
	if !rec.failing {
		rec.failing = true
		level = slog.LevelWarn
	}
	g.log.Log(context.Background(), level, "PLEG: Ignoring events for pod; it will be inspected again at the next relist",
		"pod", rec.namespace+"/"+rec.name, "podUID", rec.uid, "err", err)
}

// podIPs keeps the IPs of a pod whose sandboxes have all been torn down:
// the API expects a finished pod to keep reporting the IP it had. A pod
// with a ready sandbox reports what that sandbox reports, even nothing.
func (g *Generator) podIPs(uid string, status *runtime.PodStatus) []string {
	if len(status.IPs) > 0 {
		return status.IPs
	}
	for _, sb := range status.Sandboxes {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return status.IPs
		}
	}
	cached, err := g.cache.Get(uid)
	if err != nil || cached == nil {
		return nil
	}
	return cached.IPs
}
