// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/plegkit/pleg"
)

// writes records when the API server took each write, by kind: "patch
// nodes", "create events", "patch events".
type writes struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

func recordWrites(api *apiServer) *writes {
	w := &writes{times: map[string][]time.Time{}}
	for _, verb := range []string{"patch", "create"} {
		api.PrependReactor(verb, "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			key := a.GetVerb() + " " + a.GetResource().Resource
			w.times[key] = append(w.times[key], time.Now())
			return false, nil, nil
		})
	}
	return w
}

func (w *writes) of(key string) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.times[key]...)
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ts := range w.times {
		n += len(ts)
	}
	return n
}

// TestAChangeWaitsForTheNodesTurn: the writes of a change, the condition
// and its event alike, go at the node's place in the spread window (drawn
// at its start) that comes first after the change was seen, and no later.
func TestAChangeWaitsForTheNodesTurn(t *testing.T) {
	for _, draw := range []float64{0, 0.25, 0.99} {
		t.Run(fmt.Sprint(draw), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api, src, _ := healthyNode()
				w := recordWrites(api)
				startWith(t, src, Config{NodeName: "node-1", Client: api, Rand: func() float64 { return draw }})
				place := time.Duration(draw * float64(DefaultSpread))
				// turnAfter is the first moment from t at the node's place.
				turnAfter := func(t time.Time) time.Time {
					turn := t.Truncate(DefaultSpread).Add(place)
					if turn.Before(t) {
						turn = turn.Add(DefaultSpread)
					}
					return turn
				}
				// The first verdict is a change too: a fleet started at
				// once does not write at once either. (The bubble's
				// clock starts on a multiple of the window.)
				firstAt := time.Now()
				advance(DefaultSpread + 2*time.Second)
				if got := w.of("patch nodes"); len(got) != 1 || !got[0].Equal(turnAfter(firstAt)) {
					t.Fatalf("first condition written at %v after the first reading, want %v", since(firstAt, got), turnAfter(firstAt).Sub(firstAt))
				}

				// The runtime stops answering 3 s later; after the grace
				// the condition turns on and an event is told, both at
				// the node's next turn.
				advance(3 * time.Second)
				failingSince := time.Now()
				src.set(func(s *pleg.Status) {
					s.ListFailingSince, s.ListError = failingSince, status.Error(codes.Unavailable, "connection refused")
				})
				advance(DefaultGrace)
				seenAt := time.Now() // the reading that passes the grace
				advance(DefaultSpread + 2*time.Second)
				turn := turnAfter(seenAt)
				patches, events := w.of("patch nodes"), w.of("create events")
				if len(patches) != 2 || !patches[1].Equal(turn) {
					t.Errorf("condition turned on at %v after it was seen, want %v", since(seenAt, patches[1:]), turn.Sub(seenAt))
				}
				// An event goes out at the first reading from the turn.
				if len(events) != 1 || events[0].Before(turn) || events[0].Sub(turn) >= DefaultInterval {
					t.Errorf("event written %v after it was seen, want within a reading from %v", since(seenAt, events), turn.Sub(seenAt))
				}
			})
		})
	}
}

// TestAFlappingVerdictIsWrittenAtTheNodesTurns: a verdict that keeps
// coming and going is written as it stands at the node's turns, once per
// window at most, never in between.
func TestAFlappingVerdictIsWrittenAtTheNodesTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, src, _ := healthyNode()
		w := recordWrites(api)
		const draw = 0.75
		startWith(t, src, Config{NodeName: "node-1", Client: api, Rand: func() float64 { return draw }})
		// A pod hangs, but for one second in every four, when its
		// inspection seems to answer. At the node's turns, every 10 s,
		// it is hung and answering in turn.
		hung := []pleg.PodFailure{{UID: "u1", Name: "web", Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")}}
		for i := range 120 {
			src.set(func(s *pleg.Status) {
				s.LastRelist, s.FailingPods = time.Now(), hung
				if i%4 == 0 {
					s.FailingPods = nil
				}
			})
			advance(time.Second)
		}
		patches := w.of("patch nodes")
		place := time.Duration(draw * float64(DefaultSpread))
		for _, p := range patches {
			if into := time.Duration(p.UnixNano()) % DefaultSpread; into != place {
				t.Errorf("written %v into a window, want at the node's place, %v", into, place)
			}
		}
		if len(patches) != 120/10 {
			t.Errorf("%d writes in 2 minutes of a verdict that differs at every turn, want one per window", len(patches))
		}
	})
}

func since(t0 time.Time, ts []time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(t0))
	}
	return out
}

// TestAFleetChangingAtOnceWritesOverTheSpread runs a fleet of reporters
// whose nodes all see their runtime stop answering at the same instant,
// and then recover at the same instant: with their places spread evenly
// over the window, as a fleet's draws are on average, the API server
// takes no more than a tenth of the fleet's writes in any second of the
// 10 s spread, where without it every write would come in the same
// second.
func TestAFleetChangingAtOnceWritesOverTheSpread(t *testing.T) {
	const nodes = 50
	synctest.Test(t, func(t *testing.T) {
		api := newAPIServer()
		w := recordWrites(api)
		var srcs []*source
		for i := range nodes {
			name := fmt.Sprintf("node-%d", i)
			n := node1()
			n.Name = name
			if err := api.Tracker().Add(n); err != nil {
				t.Fatal(err)
			}
			src := &source{}
			src.set(func(s *pleg.Status) {
				*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, LastRelist: time.Now()}
			})
			srcs = append(srcs, src)
			draw := float64(i) / nodes
			startWith(t, src, Config{NodeName: name, Client: api, Rand: func() float64 { return draw }})
		}
		// Relisting goes on, but while the runtime does not answer.
		relist := func() {
			for _, src := range srcs {
				src.set(func(s *pleg.Status) {
					if s.ListFailingSince.IsZero() {
						s.LastRelist = time.Now()
					}
				})
			}
		}
		for range 60 {
			relist()
			advance(time.Second)
		}
		if got := w.count(); got != nodes {
			t.Fatalf("%d writes for %d nodes starting, want one condition each", got, nodes)
		}

		for _, phase := range []string{"incident", "recovery"} {
			before := w.count()
			at := time.Now()
			for _, src := range srcs {
				src.set(func(s *pleg.Status) {
					if phase == "incident" {
						s.ListFailingSince, s.ListError = at, status.Error(codes.Unavailable, "connection refused")
					} else {
						s.ListFailingSince, s.ListError, s.LastRelist = time.Time{}, nil, at
					}
				})
			}
			perSecond := map[int64]int{}
			for range 30 {
				n := w.count()
				relist()
				advance(time.Second)
				perSecond[time.Now().Unix()] = w.count() - n
			}
			// A condition and an event from each node.
			if got := w.count() - before; got != 2*nodes {
				t.Errorf("%s: %d writes, want %d", phase, got, 2*nodes)
			}
			for sec, n := range perSecond {
				if n > 2*nodes/10+2 {
					t.Errorf("%s: %d writes in the second to %v; want at most %d, a tenth of them and the edges",
						phase, n, time.Unix(sec, 0).Sub(at), 2*nodes/10+2)
				}
			}
		}
	})
}

// TestTheHeartbeatAfterAChangeIsDrawn: the first heartbeat after a change
// comes at a random point of the period's second half, the next ones a
// period apart; so a fleet that changed at once does not beat in step.
func TestTheHeartbeatAfterAChangeIsDrawn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, src, _ := healthyNode()
		w := recordWrites(api)
		const draw = 0.5
		startWith(t, src, Config{NodeName: "node-1", Client: api, Rand: func() float64 { return draw }})
		for range 15 * 60 {
			src.set(func(s *pleg.Status) { s.LastRelist = time.Now() })
			advance(time.Second)
		}
		patches := w.of("patch nodes")
		if len(patches) < 3 {
			t.Fatalf("%d writes in 15 minutes, want the first and heartbeats", len(patches))
		}
		first := DefaultHeartbeat - time.Duration(draw*float64(DefaultHeartbeat/2))
		if got := patches[1].Sub(patches[0]); got != first {
			t.Errorf("first heartbeat %v after the change, want %v", got, first)
		}
		for i := 2; i < len(patches); i++ {
			if got := patches[i].Sub(patches[i-1]); got != DefaultHeartbeat {
				t.Errorf("heartbeat %d came %v after the one before, want %v", i, got, DefaultHeartbeat)
			}
		}
	})
}

// TestARestartDrawsTheHeartbeat: a pleg that restarts on a node whose
// condition it wrote before keeps it, and beats at a drawn point of the
// period after the last heartbeat, not in step with the rest of a fleet
// restarted at once.
func TestARestartDrawsTheHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		last := metav1.NewTime(time.Now().Add(-time.Minute))
		_, src, _ := healthyNode()
		healthy := corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonHealthy,
			Message:           "relisting keeps within its threshold and every pod's status calls answer",
			LastHeartbeatTime: last, LastTransitionTime: last}
		api := newAPIServer(node1(healthy))
		w := recordWrites(api)
		startWith(t, src, Config{NodeName: "node-1", Client: api, Rand: func() float64 { return 0.5 }})
		for range 10 * 60 {
			src.set(func(s *pleg.Status) { s.LastRelist = time.Now() })
			advance(time.Second)
		}
		patches := w.of("patch nodes")
		want := last.Add(DefaultHeartbeat - DefaultHeartbeat/4)
		if len(patches) == 0 || !patches[0].Equal(want) {
			t.Errorf("heartbeats at %v, want the first at %v", patches, want)
		}
	})
}

// TestEventsWaitInTheirOrder: an event never overtakes the one decided
// before it, whatever their draws: a recovery is not told before the
// failure.
func TestEventsWaitInTheirOrder(t *testing.T) {
	var q pendingEvents
	failed := event{reason: ReasonRuntimeUnreachable}
	recovered := event{reason: ReasonRelistRecovered}
	q.add(failed, t0.Add(9*time.Second))
	q.add(recovered, t0.Add(time.Second))
	if got := q.take(t0.Add(5 * time.Second)); len(got) != 0 {
		t.Errorf("took %v at 5 s, want nothing before the first is due", told(got))
	}
	got := q.take(t0.Add(9 * time.Second))
	if len(got) != 2 || got[0].reason != ReasonRuntimeUnreachable || got[1].reason != ReasonRelistRecovered {
		t.Errorf("took %+v at 9 s, want the failure then the recovery", got)
	}
	for range maxPendingEvents {
		q.add(failed, t0)
	}
	if q.add(failed, t0) {
		t.Errorf("queued more than %d events", maxPendingEvents)
	}
}

// TestAFlappingRuntimeIsASeries: a runtime that stops answering and comes
// back ten times in five minutes makes twenty events of two kinds, which
// the events.k8s.io recorder turns into two series: each written when it
// starts and when it repeats, then counted without a write until the
// series is refreshed (30 min) or ends (6 min without one).
func TestAFlappingRuntimeIsASeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, src, reg := healthyNode()
		w := recordWrites(api)
		start(t, src, api, reg)
		advance(time.Second)
		for range 10 {
			failingSince := time.Now()
			src.set(func(s *pleg.Status) {
				s.ListFailingSince, s.ListError = failingSince, status.Error(codes.Unavailable, "connection refused")
			})
			advance(DefaultGrace + 5*time.Second)
			src.set(func(s *pleg.Status) { s.ListFailingSince, s.ListError, s.LastRelist = time.Time{}, nil, time.Now() })
			advance(15 * time.Second)
		}
		creates, patches := len(w.of("create events")), len(w.of("patch events"))
		if creates != 2 || patches != 2 {
			t.Errorf("%d events created and %d patched for 10 failures and recoveries, want each kind created once and its count patched once",
				creates, patches)
		}
		for _, e := range eventList(t, api) {
			if e.Series == nil || e.Series.Count < 2 {
				t.Errorf("event %s: series %+v, want a count", e.Reason, e.Series)
			}
		}
	})
}

func eventList(t *testing.T, api *apiServer) []eventsv1.Event {
	t.Helper()
	list, err := api.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestTheClientsShareOneBucket: the node's requests, the condition's and
// the events' alike, pass one token bucket: at 2 a second with a burst of
// 1, four of them, two of each API, cannot all be sent before 1.5 s. Only
// that lower bound is asserted, which a busy machine cannot break.
func TestTheClientsShareOneBucket(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"e","namespace":"default"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-1"}}`))
	}))
	defer srv.Close()
	kubeconfig := writeKubeconfig(t, srv.URL)
	c, err := NewClient(ClientOptions{Kubeconfig: kubeconfig, QPS: 2, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	for range 2 {
		if _, err := c.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"}}
		if _, err := c.EventsV1().Events("default").Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 1400*time.Millisecond || requests.Load() != 4 {
		t.Errorf("4 requests of two APIs at 2 a second, burst 1: took %v, %d served; want at least 1.5 s", took, requests.Load())
	}
	for _, bad := range []ClientOptions{{Kubeconfig: kubeconfig, QPS: -1}, {Kubeconfig: kubeconfig, Burst: -1}} {
		if _, err := NewClient(bad); err == nil {
			t.Errorf("NewClient(%+v) accepted", bad)
		}
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
