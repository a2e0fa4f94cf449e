// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podcache holds the latest inspected status of every pod, with the
// time each status was observed, and lets a consumer wait until the cache
// holds a status of a pod newer than a given time.
//
// The generator is the only writer; pod workers and API handlers read. The
// semantics follow the kubelet's pod cache, with three fixes: a wait takes a
// context, Delete wakes the waiters of the deleted pod, and "newer than" is
// strict on every path.
package podcache

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/plegkit/pleg/runtime"
)

// Entry is what the cache holds for one pod.
type Entry struct {
	// Status is the pod's status as last inspected. It is shared: read only.
	Status *runtime.PodStatus
	// Err is the error of the inspection that produced Status, if it failed;
	// Status is then what was gathered before the failure.
	Err error
	// Modified is the time of the observation Status came from.
	Modified time.Time
	// Observed is the latest time the pod was seen by the runtime's lists,
	// changed or not; never before Modified.
	Observed time.Time
}

// Reader is the read side of the cache, for consumers.
type Reader interface {
	Get(uid string) (*runtime.PodStatus, error)
	GetNewerThan(ctx context.Context, uid string, minTime time.Time) (*runtime.PodStatus, error)
}

// Cache is the pod status cache. The zero value is not usable; call New.
type Cache struct {
	mu      sync.RWMutex
	pods    map[string]*Entry
	global  time.Time
	waiters map[string][]*waiter
}

type waiter struct {
	minTime time.Time
	ch      chan Entry // buffered 1: notify never blocks
}

var _ Reader = (*Cache)(nil)

// New returns an empty cache whose global time is unset.
func New() *Cache {
	return &Cache{
		pods:    make(map[string]*Entry),
		waiters: make(map[string][]*waiter),
	}
}

// absent is what a pod without an entry looks like: no visible containers.
func absent(uid string) Entry {
	return Entry{Status: &runtime.PodStatus{UID: uid}}
}

// Get returns the cached status of pod uid and the error of the inspection
// that produced it. A pod the cache does not hold has an empty status (no
// sandboxes, no containers) and no error.
func (c *Cache) Get(uid string) (*runtime.PodStatus, error) {
	e, _ := c.GetEntry(uid)
	return e.Status, e.Err
}

// GetEntry returns the entry of pod uid, or the empty status and false.
func (c *Cache) GetEntry(uid string) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e, ok := c.pods[uid]; ok {
		return *e, true
	}
	return absent(uid), false
}

// GetAll returns every entry, by pod UID.
func (c *Cache) GetAll() map[string]Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	all := make(map[string]Entry, len(c.pods))
	for uid, e := range c.pods {
		all[uid] = *e
	}
	return all
}

// Len returns the number of pods the cache holds.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pods)
}

// GlobalTime returns the time every entry is known to be at least as fresh
// as, or the zero time before the first complete relist.
func (c *Cache) GlobalTime() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.global
}

// Set stores the status of pod uid observed at ts, with the error of the
// inspection if it failed, and wakes the pod's waiters. A write older than
// the status already held is refused and Set returns false: a late writer
// never replaces a fresher observation.
func (c *Cache) Set(uid string, status *runtime.PodStatus, err error, ts time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pods[uid]
	if ok && e.Modified.After(ts) {
		return false
	}
	observed := ts
	if ok && e.Observed.After(ts) {
		observed = e.Observed
	}
	c.pods[uid] = &Entry{Status: status, Err: err, Modified: ts, Observed: observed}
	c.notify(uid)
	return true
}

// SetObservedTime records that pod uid was seen unchanged at ts, which
// releases waiters for statuses older than ts without rewriting the status.
// For a pod the cache does not hold, it releases those waiters with the
// empty status.
func (c *Cache) SetObservedTime(uid string, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pods[uid]
	if !ok {
		c.release(uid, func(w *waiter) bool { return ts.After(w.minTime) }, absent(uid))
		return
	}
	if ts.After(e.Observed) {
		e.Observed = ts
	}
	c.notify(uid)
}

// Delete removes pod uid, whose sandboxes and containers are gone, and wakes
// its waiters with the empty status.
func (c *Cache) Delete(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
	c.release(uid, func(*waiter) bool { return true }, absent(uid))
}

// UpdateTime records that every entry is at least as fresh as ts and wakes
// every waiter whose wait that satisfies. The global time never goes back.
func (c *Cache) UpdateTime(ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ts.After(c.global) {
		return
	}
	c.global = ts
	for uid := range c.waiters {
		c.notify(uid)
	}
}

// GetNewerThan returns the status of pod uid once the cache knows it as
// observed after minTime: the pod's entry was observed after minTime, or the
// global time is after it. It blocks until then or until ctx ends, when it
// returns ctx's error.
func (c *Cache) GetNewerThan(ctx context.Context, uid string, minTime time.Time) (*runtime.PodStatus, error) {
	c.mu.Lock()
	if e, ok := c.newer(uid, minTime); ok {
		c.mu.Unlock()
		return e.Status, e.Err
	}
	w := &waiter{minTime: minTime, ch: make(chan Entry, 1)}
	c.waiters[uid] = append(c.waiters[uid], w)
	c.mu.Unlock()

	select {
	case e := <-w.ch:
		return e.Status, e.Err
	case <-ctx.Done():
	}
	c.mu.Lock()
	c.removeWaiter(uid, w)
	c.mu.Unlock()
	// The entry may have arrived while ctx ended; an answer beats an error.
	select {
	case e := <-w.ch:
		return e.Status, e.Err
	default:
		return nil, ctx.Err()
	}
}

// newer returns the pod's entry if it is newer than minTime. Callers hold mu.
func (c *Cache) newer(uid string, minTime time.Time) (Entry, bool) {
	e, ok := c.pods[uid]
	if c.global.After(minTime) {
		if ok {
			return *e, true
		}
		return absent(uid), true
	}
	if ok && e.Observed.After(minTime) {
		return *e, true
	}
	return Entry{}, false
}

// notify releases the waiters of uid that the current state satisfies.
// Callers hold mu.
func (c *Cache) notify(uid string) {
	ws := c.waiters[uid]
	if len(ws) == 0 {
		return
	}
	kept := ws[:0]
	for _, w := range ws {
		if e, ok := c.newer(uid, w.minTime); ok {
			w.ch <- e
			continue
		}
		kept = append(kept, w)
	}
	c.setWaiters(uid, kept)
}

// release hands e to the waiters of uid that match. Callers hold mu.
func (c *Cache) release(uid string, match func(*waiter) bool, e Entry) {
	ws := c.waiters[uid]
	kept := ws[:0]
	for _, w := range ws {
		if match(w) {
			w.ch <- e
			continue
		}
		kept = append(kept, w)
	}
	c.setWaiters(uid, kept)
}

func (c *Cache) removeWaiter(uid string, w *waiter) {
	ws := c.waiters[uid]
	kept := ws[:0]
	for _, x := range ws {
		if x != w {
			kept = append(kept, x)
		}
	}
	c.setWaiters(uid, kept)
}

func (c *Cache) setWaiters(uid string, ws []*waiter) {
	if len(ws) == 0 {
		delete(c.waiters, uid)
		return
	}
	c.waiters[uid] = ws
}

// waiting reports the number of blocked GetNewerThan calls, for tests.
func (c *Cache) waiting() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for ws := range maps.Values(c.waiters) {
		n += len(ws)
	}
	return n
}
