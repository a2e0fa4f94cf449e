// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"log/slog"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/crilist"
	"github.com/plegkit/pleg/internal/stream"
	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
)

// relistState is what relisting remembers from one relist to the next:
// what it knows of every pod, what the latest list saw, and the event
// stream's hints waiting for a relist.
//
// It belongs to whoever holds Generator.relistMu: the relist loop, which
// also applies the event stream's events, or a caller of Relist. Nothing
// else reads or writes it. Inspection workers never touch it: they get the
// pod to inspect and hand back what the runtime said, and the holder of
// relistMu writes the cache, advances the records and delivers the events.
type relistState struct {
	records map[string]*podRecord
	// pass numbers list passes, global and per-pod; a record seen by the
	// latest pass has listedPass == pass.
	pass uint64
	// seen holds the records the latest list pass saw, in list order.
	seen []*podRecord
	// last is the record group last touched: runtimes tend to list a pod's
	// items together, which spares a map lookup per item.
	last *podRecord
	// placer finds the pod of a container that lacks the pod UID label.
	placer  crilist.Placer
	invalid *invalidItems
	hints   *hintBook
	// prevRelist is when the previous global relist started: when the
	// records of the relist running, global or per-pod, were last observed.
	prevRelist time.Time
	// listing is the pod whose relist of its own is in flight while the
	// loop handles other pods' events (listPod, podListed). A payload of
	// its own overtakes its lists, which are then thrown away, since they
	// may be older and must not be compared with a record it moved; once
	// the lists are back, its payloads wait behind its inspection
	// (deferred).
	listing string
	// catchingUp is set when a Store restored what was reported, until a
	// global relist succeeds: a pod that relist finds for the first time
	// came while no generator watched.
	catchingUp bool
	// coveredSince is when the Store began keeping what was reported
	// (Restored.Since): the runtime's backlog sent since is news.
	coveredSince time.Time
	// listingBack tells that listing's lists came back and its inspection
	// may be in flight. Before that, a payload applied to the pod overtakes
	// the lists (listingOvertaken), and they are thrown away for a fresh
	// relist of the pod (see Generator.listsOvertaken).
	listingBack, listingOvertaken bool
	// deferred are listing's events that came while its inspection was in
	// flight, in order: their payloads are applied once the inspection's
	// changes are delivered (Generator.applyDeferred), so that they tell
	// nothing before it, nor wait for another relist of the pod.
	deferred []deferredPayload
	// moved holds, while a global relist's lists are in flight, the pods
	// whose records payloads moved meanwhile: that relist leaves them to
	// relists of their own (see Generator.listAll). nil otherwise.
	moved map[string]struct{}
}

// group sorts the listed sandboxes and containers into pod records, as a
// new list pass. With only set, items of other pods are ignored. With
// skipRemoved (while the event stream is connected, held or not), so are
// items already reported removed: a payload may report a removal before
// the runtime's lists stop showing the item (containerd sends a sandbox's
// DELETED just before its lists drop it), and IDs are never reused.
// Without events a list is the newest word, and an ID that comes back is
// reported again, as the kubelet does.
// After it, seen holds the records the lists saw, in list order.
func (st *relistState) group(
	sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, only string, skipRemoved bool,
) {
	st.pass++
	st.seen = st.seen[:0]
	st.last = nil
	for _, sb := range sandboxes {
		switch {
		case sb == nil:
			st.invalid.report(st.pass, invalidNilItem, "sandbox", "")
			continue
		case sb.Id == "":
			st.invalid.report(st.pass, invalidEmptyID, "sandbox", "", "pod", sb.GetMetadata().GetUid())
			continue
		case sb.Metadata == nil || sb.Metadata.Uid == "":
			st.invalid.report(st.pass, invalidNilMetadata, "sandbox", sb.Id)
			continue
		}
		md := sb.Metadata
		if (only != "" && md.Uid != only) || (skipRemoved && st.hints.isRemoved(sb.Id)) {
			continue
		}
		s, ok := sandboxState(sb.State)
		if !ok {
			st.invalid.report(st.pass, invalidUnknownState, "sandbox", sb.Id, "pod", md.Uid, "state", int32(sb.State))
		}
		rec := st.record(md.Uid, md.Name, md.Namespace)
		rec.cur = append(rec.cur, entry{id: sb.Id, state: s, sandbox: true, sb: sb})
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			rec.runningSandbox = true
		}
	}

	st.placer.Reset(sandboxes)
	for _, c := range containers {
		switch {
		case c == nil:
			st.invalid.report(st.pass, invalidNilItem, "container", "")
			continue
		case c.Id == "":
			st.invalid.report(st.pass, invalidEmptyID, "container", "", "sandbox", c.PodSandboxId)
			continue
		}
		uid := st.placer.PodUID(c)
		if uid == "" {
			st.invalid.report(st.pass, invalidNoPod, "container", c.Id, "sandbox", c.PodSandboxId)
			continue
		}
		if (only != "" && uid != only) || (skipRemoved && st.hints.isRemoved(c.Id)) {
			continue
		}
		name := c.GetMetadata().GetName()
		if c.Metadata == nil {
			name = c.Labels[runtime.ContainerNameLabel]
			st.invalid.report(st.pass, invalidNilMetadata, "container", c.Id, "pod", uid)
		}
		s, ok := containerState(c.State)
		if !ok {
			st.invalid.report(st.pass, invalidUnknownState, "container", c.Id, "pod", uid, "state", int32(c.State))
		}
		rec := st.record(uid, c.Labels[runtime.PodNameLabel], c.Labels[runtime.PodNamespaceLabel])
		rec.cur = append(rec.cur, entry{id: c.Id, name: name, state: s, c: c})
	}
	// The placer would keep the list dropListItems lets go of.
	st.placer.Reset(nil)

	for _, rec := range st.seen {
		for _, id := range rec.finishListing() {
			st.invalid.report(st.pass, invalidDuplicateID, "item", id, "pod", rec.uid)
		}
	}
}

// record returns the record of pod uid for the current list pass, creating
// it for a pod not seen before, and checks that the pod keeps one name.
func (st *relistState) record(uid, name, namespace string) *podRecord {
	rec := st.last
	if rec == nil || rec.uid != uid {
		var ok bool
		if rec, ok = st.records[uid]; !ok {
			rec = &podRecord{uid: uid, restored: st.catchingUp}
			st.records[uid] = rec
		}
		st.last = rec
	}
	if rec.listedPass != st.pass {
		rec.startListing(st.pass)
		st.seen = append(st.seen, rec)
	}
	switch {
	case rec.name == "" && rec.namespace == "":
		rec.name, rec.namespace = name, namespace
	case name != "" && (name != rec.name || namespace != rec.namespace):
		st.invalid.report(st.pass, invalidPodNameConflict,
			"pod", uid, "name", rec.namespace+"/"+rec.name, "otherName", namespace+"/"+name)
	}
	return rec
}

// dropListItems lets go of the list items the records point to, which
// only inspection needed: until the next relist, the whole list would
// stay in memory for nothing (at 10,000 pods, over 100 MB).
func (st *relistState) dropListItems() {
	for _, rec := range st.seen {
		for i := range rec.cur {
			rec.cur[i].sb, rec.cur[i].c = nil, nil
		}
	}
}

// startsUntold reports whether the first relist of a generator catching
// up from a Store, its lists just back, finds gone a container it last
// reported not yet running, while the stream is connected. Whether that
// container ran, only the runtime's backlog can tell: its STARTED, or the
// start time in its STOPPED's payload. The relist waits for the backlog
// then, past the quiet that ends awaitStream's wait: a loaded runtime may
// begin sending it later than that, and a STARTED that comes after the
// relist reported the container Died and Removed could never be told in
// order. Asked while the stream is connected.
func (st *relistState) startsUntold(containers []*runtimeapi.Container) bool {
	if !st.catchingUp || st.coveredSince.IsZero() {
		return false
	}
	listed := make(map[string]struct{}, len(containers))
	for _, c := range containers {
		listed[c.GetId()] = struct{}{}
	}
	for _, rec := range st.records {
		if !rec.restored {
			continue
		}
		for _, e := range rec.old {
			if _, ok := listed[e.id]; !ok && !e.sandbox && e.state.rankFrom() < rankRunning {
				return true
			}
		}
	}
	return false
}

// podWork is a pod to reconcile.
type podWork struct {
	rec         *podRecord
	transitions []transition
	reinspect   bool
	gone        bool
	// pod is what to inspect, taken from the record before inspection
	// workers start; nil for a pod that is gone.
	pod *runtime.Pod
	// shortLived counts the events of containers only the event stream
	// saw, among the transitions.
	shortLived int
	// untold are the removals among the transitions that no event told.
	untold stream.Removals
}

// plan decides which pods a global relist reconciles: those whose
// containers changed since their last reconcile, those it did not list
// (gone), those due for re-inspection (reinspect) or with watch conditions
// (watched), and pods the event stream reported that no list has held,
// born and gone in between. It consumes the hints of every pod it looks at,
// and leaves the pods in skip alone.
func (st *relistState) plan(reinspect, watched, skip map[string]struct{}, now time.Time) []podWork {
	pending := st.hints.podsWithHints()
	for uid := range skip {
		delete(pending, uid)
	}
	hints := func(rec *podRecord) hinted {
		if _, ok := pending[rec.uid]; !ok {
			return hinted{}
		}
		delete(pending, rec.uid)
		return st.hints.take(rec.uid, rec.sees, now)
	}
	var work []podWork
	for _, rec := range st.seen {
		if _, ok := skip[rec.uid]; ok {
			continue
		}
		_, flagged := reinspect[rec.uid]
		_, hasConditions := watched[rec.uid]
		if w, ok := workFor(rec, false, flagged, hasConditions, hints(rec)); ok {
			work = append(work, w)
		}
	}
	for _, rec := range st.records {
		if _, ok := skip[rec.uid]; ok {
			continue
		}
		if rec.listedPass != st.pass {
			rec.vanish()
			_, flagged := reinspect[rec.uid]
			w, _ := workFor(rec, true, flagged, false, hints(rec))
			work = append(work, w)
		}
	}
	for uid, ph := range pending {
		rec := &podRecord{uid: uid, name: ph.name, namespace: ph.namespace}
		if w, ok := workFor(rec, true, false, false, st.hints.take(uid, rec.sees, now)); ok && len(w.transitions) > 0 {
			work = append(work, w)
		}
	}
	return work
}

// workFor decides whether rec needs reconciling: a container changed, the
// pod is gone, it is due for re-inspection, it has watch conditions, or
// hints report containers the lists never saw.
func workFor(rec *podRecord, gone, reinspect, hasConditions bool, h hinted) (podWork, bool) {
	w := podWork{rec: rec, gone: gone, reinspect: reinspect}
	if gone || !rec.unchanged() {
		ts := rec.transitions()
		w.untold = untoldRemovals(ts, h.seen)
		for _, t := range ts {
			t.afterRestart = rec.restored
			w.transitions = append(w.transitions, expand(t, h.seen[hintKey{t.id, t.sandbox}])...)
		}
	}
	w.transitions = append(w.transitions, h.extra...)
	for _, t := range h.extra {
		w.shortLived += deliverable(t.old, t.new)
	}
	return w, gone || len(w.transitions) > 0 || reinspect || hasConditions || rec.restored
}

// running counts what the latest list saw running: the pods with a ready
// sandbox, and the containers by CRI state (created, running, exited,
// unknown, as kubelet_running_containers labels them).
func (st *relistState) running() (pods int, containers [4]int) {
	for _, rec := range st.seen {
		if rec.runningSandbox {
			pods++
		}
		for _, e := range rec.cur {
			if e.c == nil {
				continue
			}
			switch s := e.c.State; s {
			case runtimeapi.ContainerState_CONTAINER_CREATED,
				runtimeapi.ContainerState_CONTAINER_RUNNING,
				runtimeapi.ContainerState_CONTAINER_EXITED:
				containers[s]++
			default:
				containers[runtimeapi.ContainerState_CONTAINER_UNKNOWN]++
			}
		}
	}
	return pods, containers
}

// Reasons a runtime list item is malformed, the reason label of
// pleg_invalid_runtime_items_total.
const (
	invalidNilItem         = "nil_item"
	invalidEmptyID         = "empty_id"
	invalidNilMetadata     = "nil_metadata"
	invalidUnknownState    = "unknown_state"
	invalidDuplicateID     = "duplicate_id"
	invalidNoPod           = "no_pod"
	invalidPodNameConflict = "pod_name_conflict"
)

func invalidMessage(reason string) string {
	switch reason {
	case invalidNilItem:
		return "Runtime listed an empty item; ignoring it"
	case invalidEmptyID:
		return "Runtime listed an item without an ID; ignoring it"
	case invalidNilMetadata:
		return "Runtime listed an item without metadata; ignoring a sandbox, naming a container from its labels"
	case invalidUnknownState:
		return "Runtime reported a state CRI does not define; treating it as unknown"
	case invalidDuplicateID:
		return "Runtime listed the same ID twice in one pod; keeping the first"
	case invalidNoPod:
		return "Container has no pod UID label and its sandbox is not listed; ignoring it"
	default:
		return "Runtime listed one pod UID under two names; keeping the first"
	}
}

type invalidKey struct{ reason, kind, id string }

// invalidItems reports malformed list items once each: a bad item stays in
// every list until the runtime drops it, and a warning a second would bury
// the first one. An item that leaves the list and comes back is reported
// again. Only the relist goroutine uses it.
type invalidItems struct {
	log     *slog.Logger
	metrics *metrics.PLEG
	// seen maps each reported item to the last list pass that had it.
	seen map[invalidKey]uint64
}

func newInvalidItems(log *slog.Logger, m *metrics.PLEG) *invalidItems {
	return &invalidItems{log: log, metrics: m, seen: make(map[invalidKey]uint64)}
}

// report notes a malformed item of kind "sandbox", "container" or "pod".
func (v *invalidItems) report(pass uint64, reason, kind, id string, attrs ...any) {
	k := invalidKey{reason, kind, id}
	if _, ok := v.seen[k]; !ok {
		v.metrics.InvalidItems.WithLabelValues(reason).Inc()
		v.log.Warn(invalidMessage(reason), append([]any{"reason", reason, "kind", kind, "id", id}, attrs...)...)
	}
	v.seen[k] = pass
}

// forgetBefore drops items no list has had since pass, after a full list.
func (v *invalidItems) forgetBefore(pass uint64) {
	for k, p := range v.seen {
		if p < pass {
			delete(v.seen, k)
		}
	}
}
