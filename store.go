// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Store keeps what a generator reported, so that a generator started again
// on the same store carries on where the last one stopped: the first relist
// is compared with what was last reported, through the same transition
// table as every relist, and what changed meanwhile is reported once,
// marked AfterRestart, while nothing unchanged is reported again.
//
// The generator calls Restore once, from New, and Commit for every pod
// change before any subscriber can see its events, from the one goroutine
// that writes the cache. Package journal keeps them on disk; MemoryStore,
// the default, keeps them for the life of the process.
type Store interface {
	// Restore returns what the store kept of earlier runs.
	Restore() (Restored, error)
	// Commit keeps the events of a change and what is now reported of the
	// pods it touched, as one: a store must never keep one without the
	// other. A PodReport without items says the pod is gone. The events
	// may be none: a container that went to an unknown state moves its
	// pod's report without an event to deliver. An error tells that the
	// change is not kept; the generator logs it and delivers the events
	// anyway. The slices are the generator's again once Commit returns:
	// a store keeps copies of what it keeps.
	Commit(events []Event, pods []PodReport) error
}

// Restored is what a Store kept of the generators that ran before.
type Restored struct {
	// Pods are the pods as last reported.
	Pods []PodReport
	// Removed holds the containers and sandboxes reported removed lately,
	// by ID, with when: a runtime's event about one of them is old news.
	Removed map[string]time.Time
	// Since is when the store began keeping what generators reported,
	// zero if it cannot tell. A runtime's event sent since then that no
	// generator handled, as the backlog a runtime keeps for its next
	// subscriber, is news: it may tell of a container that came and went
	// while no generator watched.
	Since time.Time
}

// PodReport is what a generator last reported of one pod.
type PodReport struct {
	UID       string
	Name      string
	Namespace string
	// Items are the pod's containers and sandboxes in the states last
	// reported, sorted with sandboxes first, then by ID.
	Items []ItemReport
}

// ItemReport is a container or sandbox as last reported.
type ItemReport struct {
	ID string
	// Name is the container's name; empty for a sandbox.
	Name    string
	Sandbox bool
	State   ItemState
}

// ItemState is the state of a container or sandbox as the generator
// compares them: CRI's created and unknown states are both unknown, a
// ready sandbox runs and a not-ready one has exited.
type ItemState string

// The states of an ItemReport.
const (
	ItemRunning ItemState = "running"
	ItemExited  ItemState = "exited"
	ItemUnknown ItemState = "unknown"
)

func (s state) report() ItemState {
	switch s {
	case stateRunning:
		return ItemRunning
	case stateExited:
		return ItemExited
	default:
		return ItemUnknown
	}
}

func stateOfReport(s ItemState) (state, error) {
	switch s {
	case ItemRunning:
		return stateRunning, nil
	case ItemExited:
		return stateExited, nil
	case ItemUnknown:
		return stateUnknown, nil
	default:
		return stateNonExistent, fmt.Errorf("unknown state %q", s)
	}
}

// restoreRecords turns a store's reports into records, each marked
// restored so that its first relist inspects it, fills the cache and
// marks what changed meanwhile.
func restoreRecords(reports []PodReport) (map[string]*podRecord, error) {
	records := make(map[string]*podRecord, len(reports))
	for _, p := range reports {
		if p.UID == "" {
			return nil, fmt.Errorf("a pod report without a UID")
		}
		if len(p.Items) == 0 {
			continue
		}
		rec := &podRecord{uid: p.UID, name: p.Name, namespace: p.Namespace, restored: true}
		for _, it := range p.Items {
			s, err := stateOfReport(it.State)
			if err != nil {
				return nil, fmt.Errorf("pod %s, item %s: %w", p.UID, it.ID, err)
			}
			rec.old = append(rec.old, entry{id: it.ID, name: it.Name, sandbox: it.Sandbox, state: s})
		}
		slices.SortStableFunc(rec.old, func(a, b entry) int { return compareEntries(&a, &b) })
		rec.old = slices.CompactFunc(rec.old, func(a, b entry) bool { return compareEntries(&a, &b) == 0 })
		records[p.UID] = rec
	}
	return records, nil
}

// MemoryStore is a Store that keeps the pods' reports in memory: a
// generator created again on the same MemoryStore, in the same process,
// carries on as one on a journal would across a restart. It keeps no
// events. The zero value is ready to use.
type MemoryStore struct {
	mu   sync.Mutex
	pods map[string]PodReport
}

// Restore returns the reports committed so far.
func (m *MemoryStore) Restore() (Restored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PodReport, 0, len(m.pods))
	for _, p := range m.pods {
		out = append(out, p)
	}
	return Restored{Pods: out}, nil
}

// Commit keeps the reports; a report without items deletes its pod.
func (m *MemoryStore) Commit(_ []Event, pods []PodReport) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range pods {
		if len(p.Items) == 0 {
			delete(m.pods, p.UID)
			continue
		}
		if m.pods == nil {
			m.pods = make(map[string]PodReport)
		}
		m.pods[p.UID] = p
	}
	return nil
}
