// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import "time"

// expireBefore drops the oldest entries up to the newest event observed
// before cutoff, with the gaps among them, and tells how many went. It
// stops at the first event observed at or after cutoff: what follows it
// stays even if older (a clock stepped back), so that the entries held
// stay one run of numbers. A gap is timeless; it goes with the old event
// after it, and stays before a new one, where it still tells of events
// lost among those held.
func (r *ring) expireBefore(cutoff time.Time) int {
	drop := 0
	for i := 0; i < r.n; i++ {
		s := r.at(i)
		if s.gap {
			continue
		}
		if !fromUnixNano(s.observed).Before(cutoff) {
			break
		}
		drop = i + 1
	}
	for range drop {
		r.advance()
	}
	r.release()
	return drop
}

// expire drops, under the lock, the events older than the retention, and
// the segments that held only those.
func (j *Journal) expire() {
	if j.opts.Retention <= 0 || j.ring.expireBefore(j.opts.Clock.Now().Add(-j.opts.Retention)) == 0 {
		return
	}
	if j.w != nil {
		j.w.dropSegmentsUpTo(j.ring.floor)
	}
	j.updateGauges()
}

// expirePeriod is how often a journal with a retention drops what aged
// past it while nothing is committed or read: a hundredth of the
// retention, between a second and a minute.
func expirePeriod(retention time.Duration) time.Duration {
	return min(max(retention/100, time.Second), time.Minute)
}

// expireLoop expires events every expirePeriod, so that a quiet node's
// journal and segments do not outlive the retention; Commit and Read
// expire too, so what readers see never does.
func (j *Journal) expireLoop() {
	defer close(j.expireDone)
	t := j.opts.Clock.NewTicker(expirePeriod(j.opts.Retention))
	defer t.Stop()
	for {
		select {
		case <-j.stopExpire:
			return
		case <-t.C():
		}
		j.mu.Lock()
		j.expire()
		j.mu.Unlock()
	}
}

// Held tells which entries the journal holds for readers: every one
// numbered after floor, up to last. dropped tells that the bounds or the
// retention have dropped entries since the store began (floor is then the
// newest one dropped): a reader that finds nothing of what it looks for
// knows whether it may have been there.
func (j *Journal) Held() (floor, last uint64, dropped bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.expire()
	return j.ring.floor, j.next - 1, j.ring.floor >= j.origin
}
