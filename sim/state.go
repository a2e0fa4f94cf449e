// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// The state of the simulated runtime: the store of its objects
// (objects.go), which mutations change (mutations.go) and lists read
// (lists.go), with its indexes, its IDs, its history and its events.
//
// Every list item and status handed out is immutable: a change builds new
// ones and replaces the old, so lists and status calls share them without
// copying and without holding the lock while gRPC encodes them. The full
// lists are kept ready between changes, since an unfiltered list is what a
// relist asks for every second.

// uidIndex holds the sandboxes and containers labelled with one pod UID,
// in creation order, so that a relist of one pod does not scan the node.
type uidIndex struct {
	sandboxes  []*sandbox
	containers []*container
}

// eventBuf collects the events of changes made under the lock, to be
// published after it is released: publishing may wait for a slow
// subscriber, and lists must go on meanwhile.
type eventBuf []*runtimeapi.ContainerEventResponse

type store struct {
	mu       sync.RWMutex
	seed     uint64
	clock    clock.PassiveClock
	eventsOn bool
	// podRemovalEvents tells removeSandbox to send DELETED events, for
	// the sandbox and the containers removed with it, as containerd does;
	// CRI-O sends none.
	podRemovalEvents bool

	counter uint64 // for IDs
	ipN     uint64

	sandboxes  map[string]*sandbox
	containers map[string]*container
	// Creation order, with removed entries left until compaction.
	sbOrder  []*sandbox
	ctrOrder []*container
	sbDead   int
	ctrDead  int
	byUID    map[string]*uidIndex
	names    map[string]string

	// The ready full lists and their encodings; valid while the flags are
	// set.
	sbList    wireList[*runtimeapi.PodSandbox]
	sbListOK  bool
	ctrList   wireList[*runtimeapi.Container]
	ctrListOK bool

	tick    uint64
	history history
}

func newStore(seed uint64, clk clock.PassiveClock, events EventMode, historyLimit int) *store {
	return &store{
		seed:             seed,
		clock:            clk,
		eventsOn:         events != EventsOff,
		podRemovalEvents: events == EventsContainerd,
		sandboxes:        make(map[string]*sandbox),
		containers:       make(map[string]*container),
		byUID:            make(map[string]*uidIndex),
		names:            make(map[string]string),
		history:          history{limit: historyLimit},
	}
}

// hash returns 32 bytes derived from the seed, a purpose and the counter.
func (st *store) hash(purpose string) [32]byte {
	st.counter++
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], st.seed)
	binary.LittleEndian.PutUint64(b[8:], st.counter)
	return sha256.Sum256(append(b[:], purpose...))
}

// newID returns a 64-hex-digit ID like containerd's.
func (st *store) newID() string {
	h := st.hash("id")
	return hex.EncodeToString(h[:])
}

// newUID returns a pod UID shaped like a Kubernetes one (a version 4 UUID).
func (st *store) newUID() string {
	h := st.hash("uid")
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	s := hex.EncodeToString(h[:16])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

func (st *store) now() int64 { return st.clock.Now().UnixNano() }

func (st *store) record(c Change) {
	c.Tick = st.tick
	st.history.add(c)
}

// event adds an event about id, of sandbox sb, to out: the sandbox's
// status (none once it is removed) and the status of each of its
// containers, as containerd sends.
func (st *store) event(out *eventBuf, sb *sandbox, id string, typ runtimeapi.ContainerEventType) {
	if out == nil || !st.eventsOn {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ}
	if !sb.removed {
		ev.PodSandboxStatus = sb.status
	}
	ev.ContainersStatuses = make([]*runtimeapi.ContainerStatus, len(sb.containers))
	for i, c := range sb.containers {
		ev.ContainersStatuses[i] = c.status
	}
	*out = append(*out, ev)
}

func (st *store) index(uid string) *uidIndex {
	ix := st.byUID[uid]
	if ix == nil {
		ix = &uidIndex{}
		st.byUID[uid] = ix
	}
	return ix
}

func (st *store) unindex(uid string, sb *sandbox, c *container) {
	ix := st.byUID[uid]
	if ix == nil {
		return
	}
	if sb != nil {
		ix.sandboxes = slices.DeleteFunc(ix.sandboxes, func(x *sandbox) bool { return x == sb })
	}
	if c != nil {
		ix.containers = slices.DeleteFunc(ix.containers, func(x *container) bool { return x == c })
	}
	if len(ix.sandboxes) == 0 && len(ix.containers) == 0 {
		delete(st.byUID, uid)
	}
}

// compact drops removed entries from the creation orders once they are
// half of them, so that churn without lists does not grow them forever.
func (st *store) compact() {
	if st.ctrDead > 64 && st.ctrDead > len(st.ctrOrder)/2 {
		st.ctrOrder = slices.DeleteFunc(st.ctrOrder, func(c *container) bool { return c.removed })
		st.ctrDead = 0
	}
	if st.sbDead > 64 && st.sbDead > len(st.sbOrder)/2 {
		st.sbOrder = slices.DeleteFunc(st.sbOrder, func(sb *sandbox) bool { return sb.removed })
		st.sbDead = 0
	}
}
