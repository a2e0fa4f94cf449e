// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/internal/crilist"
	"github.com/plegkit/pleg/runtime"
)

// The lists: ListPodSandbox and ListContainers answered from the store,
// from the full lists kept ready between changes or, for a filter, from
// the objects the filter can match.

// allSandboxes returns the ready list of every sandbox, building it if a
// change made it stale. It is shared: never modify it.
func (st *store) allSandboxes() wireList[*runtimeapi.PodSandbox] {
	return cachedList(&st.mu, &st.sbListOK, &st.sbList, func() wireList[*runtimeapi.PodSandbox] {
		return listOf(st.sbOrder, len(st.sandboxes), func(sb *sandbox) bool { return !sb.removed }, (*sandbox).listed)
	})
}

// allContainers is allSandboxes for containers.
func (st *store) allContainers() wireList[*runtimeapi.Container] {
	return cachedList(&st.mu, &st.ctrListOK, &st.ctrList, func() wireList[*runtimeapi.Container] {
		return listOf(st.ctrOrder, len(st.containers), func(c *container) bool { return !c.removed }, (*container).listed)
	})
}

// listOf is the list answer of the objects among objs that match, in
// their order: each one's list item and its encoding. size is room to
// make for it ahead, 0 for none.
func listOf[O, T any](objs []*O, size int, match func(*O) bool, listed func(*O) (T, []byte)) wireList[T] {
	var items []T
	var encs [][]byte
	if size > 0 {
		items, encs = make([]T, 0, size), make([][]byte, 0, size)
	}
	for _, o := range objs {
		if match(o) {
			item, enc := listed(o)
			items, encs = append(items, item), append(encs, enc)
		}
	}
	return buildWire(items, encs)
}

// cachedList returns *l if *ok says it is current, else builds it under
// the write lock; lists are read far more often than the store changes.
func cachedList[T any](mu *sync.RWMutex, ok *bool, l *T, build func() T) T {
	mu.RLock()
	if *ok {
		v := *l
		mu.RUnlock()
		return v
	}
	mu.RUnlock()
	mu.Lock()
	defer mu.Unlock()
	if !*ok {
		*l, *ok = build(), true
	}
	return *l
}

// listSandboxes answers ListPodSandbox: the ready list when there is no
// filter, else a new one, in creation order either way.
func (st *store) listSandboxes(f *runtimeapi.PodSandboxFilter) wireList[*runtimeapi.PodSandbox] {
	if f.GetId() == "" && f.GetState() == nil && len(f.GetLabelSelector()) == 0 {
		return st.allSandboxes()
	}
	match := func(sb *sandbox) bool {
		return !sb.removed &&
			(f.GetState() == nil || sb.state == f.GetState().GetState()) &&
			crilist.MatchLabels(sb.labels, f.GetLabelSelector())
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var candidates []*sandbox
	switch {
	case f.GetId() != "":
		if sb, err := st.sandbox(f.GetId()); err == nil {
			candidates = []*sandbox{sb}
		}
	case f.GetLabelSelector()[runtime.PodUIDLabel] != "":
		if ix := st.byUID[f.GetLabelSelector()[runtime.PodUIDLabel]]; ix != nil {
			candidates = ix.sandboxes
		}
	default:
		candidates = st.sbOrder
	}
	return listOf(candidates, 0, match, (*sandbox).listed)
}

// listContainers answers ListContainers like listSandboxes.
func (st *store) listContainers(f *runtimeapi.ContainerFilter) wireList[*runtimeapi.Container] {
	if f.GetId() == "" && f.GetState() == nil && f.GetPodSandboxId() == "" && len(f.GetLabelSelector()) == 0 {
		return st.allContainers()
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var sb *sandbox
	if f.GetPodSandboxId() != "" {
		var err error
		if sb, err = st.sandbox(f.GetPodSandboxId()); err != nil {
			return wireList[*runtimeapi.Container]{}
		}
	}
	match := func(c *container) bool {
		return !c.removed &&
			(sb == nil || c.sb == sb) &&
			(f.GetState() == nil || c.state == f.GetState().GetState()) &&
			crilist.MatchLabels(c.labels, f.GetLabelSelector())
	}
	var candidates []*container
	switch {
	case f.GetId() != "":
		if c, err := st.container(f.GetId()); err == nil {
			candidates = []*container{c}
		}
	case sb != nil:
		candidates = sb.containers
	case f.GetLabelSelector()[runtime.PodUIDLabel] != "":
		if ix := st.byUID[f.GetLabelSelector()[runtime.PodUIDLabel]]; ix != nil {
			candidates = ix.containers
		}
	default:
		candidates = st.ctrOrder
	}
	return listOf(candidates, 0, match, (*container).listed)
}
