// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime"
)

// WatchCondition reports whether something a caller waits for holds in a
// pod's freshly inspected status.
type WatchCondition func(*runtime.PodStatus) bool

// RunningContainerWatchCondition returns a condition on the running
// container called name: it holds when cond holds on that container's
// status, and also when no such container is running, since there is
// nothing left to wait for.
func RunningContainerWatchCondition(name string, cond func(*runtimeapi.ContainerStatus) bool) WatchCondition {
	return func(s *runtime.PodStatus) bool {
		c := s.FindContainer(name)
		if c == nil || c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			return true
		}
		return cond(c)
	}
}

// versionedCondition tells a condition from the one that replaced it: each
// set gets a version no other set has had.
type versionedCondition struct {
	cond    WatchCondition
	version uint64
}

type watchConditions struct {
	mu          sync.Mutex
	byPod       map[string]map[string]versionedCondition
	lastVersion uint64
}

func newWatchConditions() *watchConditions {
	return &watchConditions{byPod: make(map[string]map[string]versionedCondition)}
}

func (w *watchConditions) set(uid, key string, cond WatchCondition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	conds := w.byPod[uid]
	if conds == nil {
		conds = make(map[string]versionedCondition)
		w.byPod[uid] = conds
	}
	w.lastVersion++
	conds[key] = versionedCondition{cond: cond, version: w.lastVersion}
}

func (w *watchConditions) has(uid string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byPod[uid]) > 0
}

// evaluate runs the conditions of pod uid on status, outside the lock so a
// condition may set conditions itself, removes those that held unless they
// were replaced meanwhile, and reports whether any held.
func (w *watchConditions) evaluate(uid string, status *runtime.PodStatus) bool {
	w.mu.Lock()
	snapshot := make(map[string]versionedCondition, len(w.byPod[uid]))
	for k, vc := range w.byPod[uid] {
		snapshot[k] = vc
	}
	w.mu.Unlock()
	if len(snapshot) == 0 {
		return false
	}

	var met []string
	for key, vc := range snapshot {
		if vc.cond(status) {
			met = append(met, key)
		}
	}
	if len(met) == 0 {
		return false
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	conds := w.byPod[uid]
	for _, key := range met {
		if cur, ok := conds[key]; ok && cur.version == snapshot[key].version {
			delete(conds, key)
		}
	}
	if len(conds) == 0 {
		delete(w.byPod, uid)
	}
	return true
}

// pods returns the pods that have conditions; nil when none has.
func (w *watchConditions) pods() map[string]struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.byPod) == 0 {
		return nil
	}
	uids := make(map[string]struct{}, len(w.byPod))
	for uid := range w.byPod {
		uids[uid] = struct{}{}
	}
	return uids
}

// drop removes every condition of pod uid.
func (w *watchConditions) drop(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byPod, uid)
}

// retain drops the conditions of every pod keep rejects.
func (w *watchConditions) retain(keep func(uid string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid := range w.byPod {
		if !keep(uid) {
			delete(w.byPod, uid)
		}
	}
}

// count returns the number of conditions set, for tests.
func (w *watchConditions) count(uid string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byPod[uid])
}
