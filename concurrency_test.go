// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package pleg

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/podcache"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// scenario replays one seeded history of runtime changes on any number of
// fake runtimes, so generators configured differently see the same thing.
type scenario struct {
	rng  *rand.Rand
	rts  []*fakeruntime.Runtime
	pods map[string]*fakeruntime.Pod
	next int
}

func newScenario(seed uint64, pods int, rts ...*fakeruntime.Runtime) *scenario {
	s := &scenario{rng: rand.New(rand.NewPCG(seed, seed)), rts: rts, pods: map[string]*fakeruntime.Pod{}}
	for range pods {
		s.addPod()
	}
	return s
}

func (s *scenario) id(prefix string) string {
	s.next++
	return fmt.Sprintf("%s-%05d", prefix, s.next)
}

func (s *scenario) addPod() {
	uid := s.id("pod")
	p := &fakeruntime.Pod{UID: uid, Name: "n" + uid, Namespace: "ns",
		IPs:       []string{fmt.Sprintf("10.0.%d.%d", s.next/250, s.next%250+1)},
		Sandboxes: []fakeruntime.Sandbox{{ID: s.id("sb"), State: ready, CreatedAt: int64(s.next)}},
	}
	for j := range 3 {
		p.Containers = append(p.Containers, fakeruntime.Container{ID: s.id("c"), Name: fmt.Sprintf("c%d", j), State: created, CreatedAt: int64(s.next)})
	}
	s.pods[uid] = p
}

// step changes about a tenth of the pods and sets inspection failures on a
// few containers.
func (s *scenario) step() {
	for _, rt := range s.rts {
		rt.ResetCalls()
	}
	uids := make([]string, 0, len(s.pods))
	for uid := range s.pods {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	failing := map[string]error{}
	for _, uid := range uids {
		p := s.pods[uid]
		if s.rng.IntN(10) != 0 {
			continue
		}
		switch s.rng.IntN(6) {
		case 0: // the pod goes away, another comes
			delete(s.pods, uid)
			s.addPod()
		case 1: // the sandbox stops
			p.Sandboxes[0].State = notReady
		default:
			c := &p.Containers[s.rng.IntN(len(p.Containers))]
			switch c.State {
			case created:
				c.State = running
			case running:
				c.State, c.ExitCode = exited, int32(s.rng.IntN(3))
			default: // replaced by a new attempt
				c.ID, c.State, c.Attempt = s.id("c"), running, c.Attempt+1
			}
			if s.rng.IntN(4) == 0 {
				failing[c.ID] = errors.New("status of " + c.ID + " failed")
			}
		}
	}
	var specs []fakeruntime.Pod
	for _, uid := range uids {
		if p, ok := s.pods[uid]; ok {
			specs = append(specs, *p)
		}
	}
	for uid, p := range s.pods {
		if !slices.Contains(uids, uid) {
			specs = append(specs, *p)
		}
	}
	for _, rt := range s.rts {
		rt.SetPods(specs...)
		for id, err := range failing {
			rt.SetItemError(id, err)
		}
	}
}

// clearFailures lets every container be inspected again.
func (s *scenario) clearFailures() {
	for _, p := range s.pods {
		for _, c := range p.Containers {
			for _, rt := range s.rts {
				rt.SetItemError(c.ID, nil)
			}
		}
	}
}

func TestConcurrencyDoesNotChangeTheOutcome(t *testing.T) {
	serialRT, parallelRT := fakeruntime.New(), fakeruntime.New()
	serial := newEnv(t, serialRT, withConcurrency(1), withCapacity(100_000))
	parallel := newEnv(t, parallelRT, withConcurrency(16), withCapacity(100_000))
	s := newScenario(42, 300, serialRT, parallelRT)
	s.step()

	for round := range 30 {
		if round == 25 {
			s.clearFailures()
		} else if round > 0 {
			s.step()
		}
		a, b := serial.relist(), parallel.relist()
		if len(a) == 0 {
			t.Fatalf("round %d: no events; the scenario changes nothing", round)
		}
		if ra, rb := reduce(a), reduce(b); !slices.Equal(ra, rb) {
			t.Fatalf("round %d: events differ:\n concurrency 1:  %v\n concurrency 16: %v", round, ra, rb)
		}
		compareCaches(t, round, serial.cache, parallel.cache)
	}
}

func compareCaches(t *testing.T, round int, a, b *podcache.Cache) {
	t.Helper()
	ea, eb := a.GetAll(), b.GetAll()
	if len(ea) != len(eb) {
		t.Fatalf("round %d: caches hold %d and %d pods", round, len(ea), len(eb))
	}
	for uid, x := range ea {
		y, ok := eb[uid]
		switch {
		case !ok:
			t.Fatalf("round %d: pod %s missing from the concurrent cache", round, uid)
		case !x.Modified.Equal(y.Modified):
			t.Fatalf("round %d: pod %s modified %v vs %v", round, uid, x.Modified, y.Modified)
		case errString(x.Err) != errString(y.Err):
			t.Fatalf("round %d: pod %s errors %v vs %v", round, uid, x.Err, y.Err)
		case !slices.Equal(x.Status.IPs, y.Status.IPs):
			t.Fatalf("round %d: pod %s IPs %v vs %v", round, uid, x.Status.IPs, y.Status.IPs)
		case !slices.EqualFunc(x.Status.Containers, y.Status.Containers, func(p, q *runtimeapi.ContainerStatus) bool { return proto.Equal(p, q) }):
			t.Fatalf("round %d: pod %s container statuses differ", round, uid)
		case !slices.EqualFunc(x.Status.Sandboxes, y.Status.Sandboxes, func(p, q *runtimeapi.PodSandboxStatus) bool { return proto.Equal(p, q) }):
			t.Fatalf("round %d: pod %s sandbox statuses differ", round, uid)
		}
	}
}

// orderStore is a MemoryStore that records what each commit held and
// checks that none of it was delivered before: received counts what a
// subscriber got.
type orderStore struct {
	MemoryStore
	t        *testing.T
	received *atomic.Int64

	mu        sync.Mutex
	committed []string // event by event: pod/container/type
	commits   int
}

func (s *orderStore) Commit(events []Event, pods []PodReport) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := s.received.Load(); got > int64(len(s.committed)) {
		s.t.Errorf("a subscriber got %d events before the store had more than %d", got, len(s.committed))
	}
	for _, ev := range events {
		s.committed = append(s.committed, ev.PodUID+"/"+ev.ContainerID+"/"+string(ev.Type))
	}
	s.commits++
	return s.MemoryStore.Commit(events, pods)
}

// TestRelistDeliversInBatches: a relist of many changed pods commits and
// delivers them in batches as their inspections come, in the order it
// applied them, never publishing one before the store has it; when
// Relist returns, everything it found is delivered.
func TestRelistDeliversInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pods []fakeruntime.Pod
		for i := range 200 {
			uid := fmt.Sprintf("pod-%03d", i)
			pods = append(pods, fakeruntime.Pod{UID: uid, Name: uid, Namespace: "ns",
				Sandboxes:  []fakeruntime.Sandbox{{ID: "sb-" + uid, State: ready}},
				Containers: []fakeruntime.Container{{ID: "c-" + uid, Name: "app", SandboxID: "sb-" + uid, State: running}}})
		}
		rt := fakeruntime.New(pods...)
		// Inspections come in waves of 16, a millisecond apart.
		rt.SetLatency(runtime.OpPodSandboxStatus, time.Millisecond)
		store := &orderStore{t: t, received: new(atomic.Int64)}
		g, err := New(rt, Options{Mode: ModeGeneric, Store: store, InspectConcurrency: 16,
			Cache: podcache.New(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		sub := g.Subscribe()
		defer sub.Close()
		var delivered []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				ev, err := sub.Next(t.Context())
				if err != nil {
					return
				}
				delivered = append(delivered, ev.PodUID+"/"+ev.ContainerID+"/"+string(ev.Type))
				store.received.Add(1)
			}
		}()

		if err := g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(g.metrics.Events.WithLabelValues(string(ContainerStarted))); n != 400 {
			t.Errorf("%v ContainerStarted published when Relist returned, want 400", n)
		}
		synctest.Wait()
		store.mu.Lock()
		defer store.mu.Unlock()
		if store.commits < 2 {
			t.Errorf("%d commits: want the relist's changes delivered in batches as inspections come", store.commits)
		}
		if !slices.Equal(delivered, store.committed) {
			t.Errorf("delivered %d events, committed %d, or not in the same order", len(delivered), len(store.committed))
		}
		sub.Close()
		<-done
	})
}
