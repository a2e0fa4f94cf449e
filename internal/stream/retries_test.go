// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package stream

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/utils/clock"
)

// relists records the relists retries ask for, and when.
type relists struct {
	mu  sync.Mutex
	at  []time.Time
	uid []string
}

func (r *relists) relist(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at, r.uid = append(r.at, time.Now()), append(r.uid, uid)
}

func (r *relists) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.at)
}

// TestRetriesBackOff: a pod that fails again waits twice as long each
// time, up to RetryCap, within the ±20% jitter; a pod with a retry
// pending gets no second one.
func TestRetriesBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rl relists
		r := newPodRetries(clock.RealClock{}, rl.relist,
			func(string) bool { return true }, func() time.Time { return time.Time{} })
		defer r.stop()
		want := retryMin
		for i := range 7 {
			start := time.Now()
			r.failed("p1", start)
			r.failed("p1", start) // pending: no second retry
			time.Sleep(3 * RetryCap / 2)
			synctest.Wait()
			if n := rl.count(); n != i+1 {
				t.Fatalf("failure %d: %d relists, want %d", i+1, n, i+1)
			}
			if wait := rl.at[i].Sub(start); wait < want*8/10 || wait > want*12/10 {
				t.Errorf("failure %d: retried after %v, want %v ±20%%", i+1, wait, want)
			}
			// Failing again within 2 x RetryCap keeps the backoff grown.
			want = min(2*want, RetryCap)
		}
	})
}

// TestRetriesProbeWhileListsFail: while the runtime's lists fail, the
// pods' retries wait for one probe in RetryCap instead of each going to
// the runtime at its own pace.
func TestRetriesProbeWhileListsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rl relists
		since := time.Now()
		r := newPodRetries(clock.RealClock{}, rl.relist,
			func(string) bool { return false }, func() time.Time { return since })
		defer r.stop()
		for _, uid := range []string{"p1", "p2", "p3", "p4"} {
			r.failed(uid, time.Now())
		}
		time.Sleep(3 * RetryCap)
		synctest.Wait()
		// The first to fire probes at once; the others wait a RetryCap
		// for the next probe, spread by up to a tenth more.
		if n := rl.count(); n < 2 || n > 4 {
			t.Errorf("%d relists in %v of failing lists, want one probe per %v, one at once", n, 3*RetryCap, RetryCap)
		}
		for i := 1; i < rl.count(); i++ {
			if gap := rl.at[i].Sub(rl.at[i-1]); gap < RetryCap {
				t.Errorf("relists %d and %d %v apart, want a probe per %v", i, i+1, gap, RetryCap)
			}
		}
		if n := r.pending(); n+rl.count() != 4 {
			t.Errorf("%d pending and %d relisted of 4 pods", n, rl.count())
		}
	})
}
