// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package podcache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plegkit/pleg/runtime"
)

var (
	t0      = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	errBoom = errors.New("inspection failed")
)

// at returns t0 plus n seconds.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// st returns a distinguishable status of pod uid.
func st(uid, tag string) *runtime.PodStatus {
	return &runtime.PodStatus{UID: uid, Name: tag}
}

func isAbsent(s *runtime.PodStatus, uid string) bool {
	return s != nil && s.UID == uid && s.Name == "" && s.Namespace == "" &&
		len(s.IPs) == 0 && len(s.Sandboxes) == 0 && len(s.Containers) == 0
}

func TestGetMissing(t *testing.T) {
	c := New()
	s, err := c.Get("p1")
	if err != nil {
		t.Fatalf("Get error = %v, want nil", err)
	}
	if !isAbsent(s, "p1") {
		t.Fatalf("Get = %+v, want the empty status of p1", s)
	}
	e, ok := c.GetEntry("p1")
	if ok {
		t.Fatalf("GetEntry ok = true for a missing pod")
	}
	if !isAbsent(e.Status, "p1") || e.Err != nil || !e.Modified.IsZero() || !e.Observed.IsZero() {
		t.Fatalf("GetEntry = %+v, want the empty status and zero times", e)
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("Len = %d, want 0", n)
	}
	if all := c.GetAll(); len(all) != 0 {
		t.Fatalf("GetAll = %v, want empty", all)
	}
	if g := c.GlobalTime(); !g.IsZero() {
		t.Fatalf("GlobalTime = %v, want zero", g)
	}
}

func TestSet(t *testing.T) {
	type write struct {
		status *runtime.PodStatus
		err    error
		ts     time.Time
		want   bool
	}
	a, b, cc := st("p", "a"), st("p", "b"), st("p", "c")
	tests := []struct {
		name         string
		writes       []write
		wantStatus   *runtime.PodStatus
		wantErr      error
		wantModified time.Time
	}{
		{
			name:         "first write",
			writes:       []write{{a, nil, at(1), true}},
			wantStatus:   a,
			wantModified: at(1),
		},
		{
			name:         "newer write replaces",
			writes:       []write{{a, nil, at(1), true}, {b, nil, at(2), true}},
			wantStatus:   b,
			wantModified: at(2),
		},
		{
			name:         "equal time replaces",
			writes:       []write{{a, nil, at(1), true}, {b, nil, at(1), true}},
			wantStatus:   b,
			wantModified: at(1),
		},
		{
			name:         "older write refused",
			writes:       []write{{a, nil, at(2), true}, {b, errBoom, at(1), false}},
			wantStatus:   a,
			wantModified: at(2),
		},
		{
			name:         "older than the latest of several refused",
			writes:       []write{{a, nil, at(1), true}, {b, nil, at(3), true}, {cc, nil, at(2), false}},
			wantStatus:   b,
			wantModified: at(3),
		},
		{
			name:         "error cached with partial status",
			writes:       []write{{a, errBoom, at(1), true}},
			wantStatus:   a,
			wantErr:      errBoom,
			wantModified: at(1),
		},
		{
			name:         "success after error clears the error",
			writes:       []write{{a, errBoom, at(1), true}, {b, nil, at(2), true}},
			wantStatus:   b,
			wantModified: at(2),
		},
		{
			name:         "refused write keeps the held error",
			writes:       []write{{a, errBoom, at(2), true}, {b, nil, at(1), false}},
			wantStatus:   a,
			wantErr:      errBoom,
			wantModified: at(2),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			for i, w := range tt.writes {
				if got := c.Set("p", w.status, w.err, w.ts); got != w.want {
					t.Fatalf("write %d: Set = %v, want %v", i, got, w.want)
				}
			}
			s, err := c.Get("p")
			if s != tt.wantStatus {
				t.Errorf("Get status = %+v, want %+v", s, tt.wantStatus)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Get err = %v, want %v", err, tt.wantErr)
			}
			e, ok := c.GetEntry("p")
			if !ok {
				t.Fatalf("GetEntry ok = false")
			}
			if e.Status != tt.wantStatus || !e.Modified.Equal(tt.wantModified) || !e.Observed.Equal(tt.wantModified) {
				t.Errorf("GetEntry = %+v, want status %p modified=observed=%v", e, tt.wantStatus, tt.wantModified)
			}
			if c.Len() != 1 {
				t.Errorf("Len = %d, want 1", c.Len())
			}
		})
	}
}

func TestGetAllGetEntryLenDelete(t *testing.T) {
	c := New()
	want := map[string]*runtime.PodStatus{}
	for i := range 5 {
		uid := "p" + strconv.Itoa(i)
		want[uid] = st(uid, "s")
		var err error
		if i == 3 {
			err = errBoom
		}
		c.Set(uid, want[uid], err, at(i))
	}
	if c.Len() != 5 {
		t.Fatalf("Len = %d, want 5", c.Len())
	}
	all := c.GetAll()
	if len(all) != 5 {
		t.Fatalf("GetAll has %d entries, want 5", len(all))
	}
	for uid, s := range want {
		e := all[uid]
		if e.Status != s {
			t.Errorf("GetAll[%s].Status = %p, want %p", uid, e.Status, s)
		}
		i, _ := strconv.Atoi(uid[1:])
		if !e.Modified.Equal(at(i)) {
			t.Errorf("GetAll[%s].Modified = %v, want %v", uid, e.Modified, at(i))
		}
		if (i == 3) != (e.Err != nil) {
			t.Errorf("GetAll[%s].Err = %v", uid, e.Err)
		}
		g, ok := c.GetEntry(uid)
		if !ok || g != e {
			t.Errorf("GetEntry(%s) = %+v, %v; want %+v, true", uid, g, ok, e)
		}
	}

	// The returned map and entries are copies: changing them does not
	// change the cache.
	delete(all, "p0")
	e1 := all["p1"]
	e1.Modified = at(100)
	all["p1"] = e1
	if c.Len() != 5 {
		t.Fatalf("Len after editing GetAll's map = %d, want 5", c.Len())
	}
	if e, _ := c.GetEntry("p1"); !e.Modified.Equal(at(1)) {
		t.Fatalf("editing a GetAll entry changed the cache: %v", e.Modified)
	}

	c.Delete("p2")
	c.Delete("nope") // deleting a missing pod is harmless
	if c.Len() != 4 {
		t.Fatalf("Len after Delete = %d, want 4", c.Len())
	}
	if _, ok := c.GetEntry("p2"); ok {
		t.Fatalf("GetEntry(p2) ok after Delete")
	}
	if s, err := c.Get("p2"); err != nil || !isAbsent(s, "p2") {
		t.Fatalf("Get(p2) after Delete = %+v, %v; want empty status", s, err)
	}
	if _, ok := c.GetAll()["p2"]; ok {
		t.Fatalf("GetAll still holds p2 after Delete")
	}
	// A deleted pod can be written again from scratch.
	if !c.Set("p2", st("p2", "again"), nil, at(0)) {
		t.Fatalf("Set after Delete refused")
	}
}

func TestObservedTime(t *testing.T) {
	c := New()
	a := st("p", "a")
	c.Set("p", a, errBoom, at(2))

	c.SetObservedTime("p", at(5))
	e, _ := c.GetEntry("p")
	if e.Status != a || !errors.Is(e.Err, errBoom) || !e.Modified.Equal(at(2)) || !e.Observed.Equal(at(5)) {
		t.Fatalf("after SetObservedTime(5): %+v; want status, error and Modified kept, Observed 5", e)
	}

	c.SetObservedTime("p", at(3)) // never back
	if e, _ := c.GetEntry("p"); !e.Observed.Equal(at(5)) {
		t.Fatalf("Observed moved back to %v", e.Observed)
	}

	// A write between Modified and Observed is accepted and keeps Observed.
	b := st("p", "b")
	if !c.Set("p", b, nil, at(4)) {
		t.Fatalf("Set(4) refused")
	}
	if e, _ := c.GetEntry("p"); e.Status != b || e.Err != nil || !e.Modified.Equal(at(4)) || !e.Observed.Equal(at(5)) {
		t.Fatalf("after Set(4): %+v; want b, Modified 4, Observed 5", e)
	}
	// A write after Observed moves both.
	if !c.Set("p", a, nil, at(7)) {
		t.Fatalf("Set(7) refused")
	}
	if e, _ := c.GetEntry("p"); !e.Modified.Equal(at(7)) || !e.Observed.Equal(at(7)) {
		t.Fatalf("after Set(7): %+v; want Modified = Observed = 7", e)
	}

	// Observing a pod the cache does not hold does not create it.
	c.SetObservedTime("other", at(9))
	if _, ok := c.GetEntry("other"); ok || c.Len() != 1 {
		t.Fatalf("SetObservedTime created an entry for a missing pod")
	}
}

func TestUpdateTime(t *testing.T) {
	tests := []struct {
		name    string
		updates []time.Time
		want    time.Time
	}{
		{"none", nil, time.Time{}},
		{"one", []time.Time{at(1)}, at(1)},
		{"forward", []time.Time{at(1), at(3)}, at(3)},
		{"never back", []time.Time{at(3), at(1)}, at(3)},
		{"equal", []time.Time{at(3), at(3)}, at(3)},
		{"zero ignored", []time.Time{at(3), {}}, at(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			for _, u := range tt.updates {
				c.UpdateTime(u)
			}
			if g := c.GlobalTime(); !g.Equal(tt.want) {
				t.Fatalf("GlobalTime = %v, want %v", g, tt.want)
			}
			if c.Len() != 0 {
				t.Fatalf("UpdateTime created entries")
			}
		})
	}
}

type result struct {
	status *runtime.PodStatus
	err    error
}

// wait starts GetNewerThan in a goroutine of the current bubble.
func wait(ctx context.Context, c *Cache, uid string, minTime time.Time) <-chan result {
	ch := make(chan result, 1)
	go func() {
		s, err := c.GetNewerThan(ctx, uid, minTime)
		ch <- result{s, err}
	}()
	return ch
}

// returned reports whether the call behind ch has returned once every
// goroutine of the bubble is blocked, and its result.
func returned(ch <-chan result) (result, bool) {
	synctest.Wait()
	select {
	case r := <-ch:
		return r, true
	default:
		return result{}, false
	}
}

func TestGetNewerThanImmediate(t *testing.T) {
	held := st("p", "held")
	tests := []struct {
		name    string
		setup   func(c *Cache)
		minTime time.Time
		want    *runtime.PodStatus // nil: the empty status
		wantErr error
	}{
		{
			name:    "entry modified after minTime",
			setup:   func(c *Cache) { c.Set("p", held, nil, at(2)) },
			minTime: at(1),
			want:    held,
		},
		{
			name: "entry observed after minTime",
			setup: func(c *Cache) {
				c.Set("p", held, nil, at(1))
				c.SetObservedTime("p", at(3))
			},
			minTime: at(2),
			want:    held,
		},
		{
			name: "global time after minTime, entry older",
			setup: func(c *Cache) {
				c.Set("p", held, nil, at(1))
				c.UpdateTime(at(3))
			},
			minTime: at(2),
			want:    held,
		},
		{
			name:    "global time after minTime, no entry",
			setup:   func(c *Cache) { c.UpdateTime(at(3)) },
			minTime: at(2),
		},
		{
			name:    "cached error returned with the status",
			setup:   func(c *Cache) { c.Set("p", held, errBoom, at(3)) },
			minTime: at(2),
			want:    held,
			wantErr: errBoom,
		},
		{
			name:    "zero minTime and any entry",
			setup:   func(c *Cache) { c.Set("p", held, nil, at(0)) },
			minTime: time.Time{},
			want:    held,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := New()
				tt.setup(c)
				r, ok := returned(wait(t.Context(), c, "p", tt.minTime))
				if !ok {
					t.Fatalf("GetNewerThan blocked; want an immediate answer")
				}
				checkResult(t, r, "p", tt.want, tt.wantErr)
				if n := c.waiting(); n != 0 {
					t.Fatalf("waiting() = %d after an immediate answer", n)
				}
			})
		})
	}
}

func checkResult(t *testing.T, r result, uid string, want *runtime.PodStatus, wantErr error) {
	t.Helper()
	if want == nil {
		if !isAbsent(r.status, uid) {
			t.Errorf("status = %+v, want the empty status of %s", r.status, uid)
		}
	} else if r.status != want {
		t.Errorf("status = %+v, want %+v", r.status, want)
	}
	if !errors.Is(r.err, wantErr) {
		t.Errorf("err = %v, want %v", r.err, wantErr)
	}
}

func TestGetNewerThanWakes(t *testing.T) {
	held, newer := st("p", "held"), st("p", "newer")
	holdAt1 := func(c *Cache) { c.Set("p", held, nil, at(1)) }
	nothing := func(*Cache) {}
	tests := []struct {
		name    string
		setup   func(c *Cache)
		minTime time.Time
		act     func(c *Cache)
		woken   bool
		want    *runtime.PodStatus // nil: the empty status
		wantErr error
	}{
		{
			name: "newer Set", setup: holdAt1, minTime: at(2),
			act:   func(c *Cache) { c.Set("p", newer, nil, at(3)) },
			woken: true, want: newer,
		},
		{
			name: "newer Set of a missing pod", setup: nothing, minTime: at(2),
			act:   func(c *Cache) { c.Set("p", newer, nil, at(3)) },
			woken: true, want: newer,
		},
		{
			name: "newer Set with error", setup: holdAt1, minTime: at(2),
			act:   func(c *Cache) { c.Set("p", newer, errBoom, at(3)) },
			woken: true, want: newer, wantErr: errBoom,
		},
		{
			name: "Set at exactly minTime", setup: holdAt1, minTime: at(2),
			act: func(c *Cache) { c.Set("p", newer, nil, at(2)) },
		},
		{
			name: "Set before minTime", setup: holdAt1, minTime: at(3),
			act: func(c *Cache) { c.Set("p", newer, nil, at(2)) },
		},
		{
			name: "refused older Set", setup: func(c *Cache) { c.Set("p", held, nil, at(5)) }, minTime: at(6),
			act: func(c *Cache) { c.Set("p", newer, nil, at(4)) },
		},
		{
			name: "Set of another pod", setup: holdAt1, minTime: at(2),
			act: func(c *Cache) { c.Set("q", st("q", "x"), nil, at(9)) },
		},
		{
			name: "UpdateTime past minTime, held pod", setup: holdAt1, minTime: at(2),
			act:   func(c *Cache) { c.UpdateTime(at(3)) },
			woken: true, want: held,
		},
		{
			name: "UpdateTime past minTime, missing pod", setup: nothing, minTime: at(2),
			act:   func(c *Cache) { c.UpdateTime(at(3)) },
			woken: true,
		},
		{
			name: "UpdateTime at exactly minTime", setup: holdAt1, minTime: at(2),
			act: func(c *Cache) { c.UpdateTime(at(2)) },
		},
		{
			name: "UpdateTime at exactly minTime, missing pod", setup: nothing, minTime: at(2),
			act: func(c *Cache) { c.UpdateTime(at(2)) },
		},
		{
			name: "SetObservedTime past minTime, held pod", setup: holdAt1, minTime: at(2),
			act:   func(c *Cache) { c.SetObservedTime("p", at(3)) },
			woken: true, want: held,
		},
		{
			name: "SetObservedTime at exactly minTime, held pod", setup: holdAt1, minTime: at(2),
			act: func(c *Cache) { c.SetObservedTime("p", at(2)) },
		},
		{
			name: "SetObservedTime past minTime, missing pod", setup: nothing, minTime: at(2),
			act:   func(c *Cache) { c.SetObservedTime("p", at(3)) },
			woken: true,
		},
		{
			name: "SetObservedTime at exactly minTime, missing pod", setup: nothing, minTime: at(2),
			act: func(c *Cache) { c.SetObservedTime("p", at(2)) },
		},
		{
			name: "SetObservedTime of another pod", setup: nothing, minTime: at(2),
			act: func(c *Cache) { c.SetObservedTime("q", at(3)) },
		},
		{
			name: "Delete", setup: holdAt1, minTime: at(2),
			act:   func(c *Cache) { c.Delete("p") },
			woken: true,
		},
		{
			name: "Delete of a missing pod", setup: nothing, minTime: at(2),
			act:   func(c *Cache) { c.Delete("p") },
			woken: true,
		},
		{
			name: "Delete of another pod", setup: holdAt1, minTime: at(2),
			act: func(c *Cache) { c.Delete("q") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := New()
				tt.setup(c)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				ch := wait(ctx, c, "p", tt.minTime)
				if _, ok := returned(ch); ok {
					t.Fatalf("GetNewerThan returned before the action")
				}
				if n := c.waiting(); n != 1 {
					t.Fatalf("waiting() = %d, want 1", n)
				}
				tt.act(c)
				r, ok := returned(ch)
				if ok != tt.woken {
					t.Fatalf("woken = %v, want %v (result %+v)", ok, tt.woken, r)
				}
				if ok {
					checkResult(t, r, "p", tt.want, tt.wantErr)
					if n := c.waiting(); n != 0 {
						t.Fatalf("waiting() = %d after wake-up, want 0", n)
					}
					return
				}
				if n := c.waiting(); n != 1 {
					t.Fatalf("waiting() = %d, want 1", n)
				}
				cancel()
				r, ok = returned(ch)
				if !ok || r.status != nil || !errors.Is(r.err, context.Canceled) {
					t.Fatalf("after cancel: %+v, %v; want nil, context.Canceled", r, ok)
				}
				if n := c.waiting(); n != 0 {
					t.Fatalf("waiting() = %d after cancel, want 0", n)
				}
			})
		})
	}
}

func TestGetNewerThanContext(t *testing.T) {
	t.Run("cancel while blocked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := New()
			c.Set("p", st("p", "a"), nil, at(1))
			ctx, cancel := context.WithCancel(t.Context())
			ch := wait(ctx, c, "p", at(1))
			if _, ok := returned(ch); ok {
				t.Fatalf("returned before cancel")
			}
			cancel()
			r, ok := returned(ch)
			if !ok {
				t.Fatalf("cancel did not release the wait")
			}
			if r.status != nil || !errors.Is(r.err, context.Canceled) {
				t.Fatalf("got %+v, want nil status and context.Canceled", r)
			}
			if n := c.waiting(); n != 0 {
				t.Fatalf("waiting() = %d, want 0", n)
			}
			// A later write to the pod still works and wakes nobody stale.
			c.Set("p", st("p", "b"), nil, at(5))
		})
	})
	t.Run("already cancelled, nothing newer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := New()
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			s, err := c.GetNewerThan(ctx, "p", at(1))
			if s != nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("got %+v, %v; want nil, context.Canceled", s, err)
			}
			if n := c.waiting(); n != 0 {
				t.Fatalf("waiting() = %d, want 0", n)
			}
		})
	})
	t.Run("already cancelled, newer held", func(t *testing.T) {
		c := New()
		a := st("p", "a")
		c.Set("p", a, nil, at(2))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// An answer at hand beats the error.
		if s, err := c.GetNewerThan(ctx, "p", at(1)); s != a || err != nil {
			t.Fatalf("got %+v, %v; want the held status", s, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := New()
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			s, err := c.GetNewerThan(ctx, "p", at(1))
			if s != nil || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %+v, %v; want nil, DeadlineExceeded", s, err)
			}
			if d := time.Since(start); d != time.Second {
				t.Fatalf("returned after %v (bubble time), want 1s", d)
			}
			if n := c.waiting(); n != 0 {
				t.Fatalf("waiting() = %d, want 0", n)
			}
		})
	})
	t.Run("cancel one of several", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := New()
			ctx1, cancel1 := context.WithCancel(t.Context())
			ch1 := wait(ctx1, c, "p", at(1))
			ch2 := wait(t.Context(), c, "p", at(1))
			synctest.Wait()
			if n := c.waiting(); n != 2 {
				t.Fatalf("waiting() = %d, want 2", n)
			}
			cancel1()
			if r, ok := returned(ch1); !ok || !errors.Is(r.err, context.Canceled) {
				t.Fatalf("cancelled waiter: %+v, %v", r, ok)
			}
			if _, ok := returned(ch2); ok {
				t.Fatalf("the other waiter returned")
			}
			if n := c.waiting(); n != 1 {
				t.Fatalf("waiting() = %d, want 1", n)
			}
			b := st("p", "b")
			c.Set("p", b, nil, at(2))
			if r, ok := returned(ch2); !ok || r.status != b || r.err != nil {
				t.Fatalf("remaining waiter: %+v, %v", r, ok)
			}
			if n := c.waiting(); n != 0 {
				t.Fatalf("waiting() = %d, want 0", n)
			}
		})
	})
}

// Waiters of one pod with different minTimes are released in order of
// their minTime, each exactly when a write passes it.
func TestGetNewerThanSeveralMinTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		chs := make([]<-chan result, 5)
		for i := range chs {
			chs[i] = wait(t.Context(), c, "p", at(i))
		}
		synctest.Wait()
		done := make([]bool, len(chs))
		for ts := 0; ts <= len(chs); ts++ {
			s := st("p", strconv.Itoa(ts))
			c.Set("p", s, nil, at(ts))
			for i, ch := range chs {
				if done[i] {
					continue
				}
				r, ok := returned(ch)
				if want := i < ts; ok != want {
					t.Fatalf("after Set(%d): waiter min=%d returned=%v, want %v", ts, i, ok, want)
				}
				if ok {
					done[i] = true
					if r.status != s {
						t.Fatalf("waiter min=%d got %+v, want status written at %d", i, r.status, ts)
					}
				}
			}
			if n, want := c.waiting(), len(chs)-ts; n != want {
				t.Fatalf("after Set(%d): waiting() = %d, want %d", ts, n, want)
			}
		}
	})
}

// Many waiters on several pods, a writer moving time forward by Set,
// SetObservedTime and UpdateTime, readers, and cancellations, all at once.
func TestGetNewerThanConcurrent(t *testing.T) {
	const (
		pods    = 4
		waiters = 50
		steps   = 200
	)
	c := New()
	uid := func(i int) string { return fmt.Sprintf("pod-%d", i) }
	// Guard only: nothing here should take long, but never hang the suite.
	guard, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()

	var wg sync.WaitGroup
	errs := make(chan error, pods*waiters)
	for p := range pods {
		for w := range waiters {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(p), uint64(w)))
				least := rng.IntN(steps - 1)
				ctx := guard
				if w%5 == 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(guard)
					go cancel()
				}
				s, err := c.GetNewerThan(ctx, uid(p), at(least))
				switch {
				case err != nil && w%5 == 0 && errors.Is(err, context.Canceled):
				case err != nil:
					errs <- fmt.Errorf("waiter %d/%d (min %d): %w", p, w, least, err)
				case s == nil || s.UID != uid(p):
					errs <- fmt.Errorf("waiter %d/%d: status %+v of the wrong pod", p, w, s)
				case s.Name != "":
					// A written status: its tag is the time it was written at,
					// and it was handed out because the pod or the cache was
					// seen after min. The tag itself may be older (a pod seen
					// unchanged), never later than the end.
					if n, err := strconv.Atoi(s.Name); err != nil || n >= steps {
						errs <- fmt.Errorf("waiter %d/%d: bad status %+v", p, w, s)
					}
				}
			})
		}
	}
	// Readers.
	readCtx, stopReaders := context.WithCancel(guard)
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for readCtx.Err() == nil {
				for p := range pods {
					_, _ = c.Get(uid(p))
					c.GetEntry(uid(p))
				}
				c.GetAll()
				c.Len()
				c.GlobalTime()
				c.waiting()
			}
		})
	}
	// Writer: at each step every pod is either written, seen unchanged or
	// left alone, and every few steps the global time moves.
	for ts := range steps {
		for p := range pods {
			switch (ts + p) % 3 {
			case 0:
				c.Set(uid(p), st(uid(p), strconv.Itoa(ts)), nil, at(ts))
			case 1:
				c.SetObservedTime(uid(p), at(ts))
			}
		}
		if ts%7 == 0 {
			c.UpdateTime(at(ts))
		}
	}
	c.UpdateTime(at(steps))
	wg.Wait()
	stopReaders()
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := c.waiting(); n != 0 {
		t.Fatalf("waiting() = %d at the end, want 0", n)
	}
}
