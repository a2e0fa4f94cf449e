// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubereport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/plegkit/pleg"
)

// source is a hand-set Source.
type source struct {
	mu sync.Mutex
	st pleg.Status
}

func (s *source) Status() pleg.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *source) set(f func(*pleg.Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
}

// apiServer is the fake clientset with a switch that makes every write
// fail as an API server that is down would.
type apiServer struct {
	*fake.Clientset
	mu   sync.Mutex
	down bool
}

func newAPIServer(objects ...runtime.Object) *apiServer {
	a := &apiServer{Clientset: fake.NewClientset(objects...)}
	a.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.down {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	return a
}

func (a *apiServer) setDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

func (a *apiServer) condition(t *testing.T) *corev1.NodeCondition {
	t.Helper()
	node, err := a.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	return find(node.(*corev1.Node))
}

// events are the events written, as "Kind/name Type Reason xCount".
func (a *apiServer) events(t *testing.T) []string {
	t.Helper()
	list, err := a.Tracker().List(schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"},
		schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.(*eventsv1.EventList).Items {
		count := int32(1)
		if e.Series != nil {
			count = e.Series.Count
		}
		name := e.Regarding.Name
		if e.Regarding.Namespace != "" {
			name = e.Regarding.Namespace + "/" + name
		}
		s := e.Regarding.Kind + "/" + name + " " + e.Type + " " + e.Reason
		if count > 1 {
			s += " x" + string(rune('0'+count))
		}
		if e.ReportingController != Component || e.Action == "" || e.Note == "" {
			t.Errorf("event %s: controller %q action %q note %q", s, e.ReportingController, e.Action, e.Note)
		}
		// The node, not the host name client-go's recorder would name.
		if e.ReportingInstance != "node-1" {
			t.Errorf("event %s: reportingInstance %q, want the node's name", s, e.ReportingInstance)
		}
		out = append(out, s)
	}
	return out
}

func node1(conditions ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: corev1.NodeStatus{Conditions: append([]corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		}, conditions...)},
	}
}

// noSpread and noDraw make a reporter write a change at once, and its
// first heartbeat after it a whole period later. The tests of the spread
// itself set others.
const noSpread = time.Nanosecond

func noDraw() float64 { return 0 }

// start runs a reporter of src in the bubble until the test ends; its
// writes are not spread.
func start(t *testing.T, src Source, api Client, reg prometheus.Registerer) {
	t.Helper()
	startWith(t, src, Config{NodeName: "node-1", Client: api, Registerer: reg, Spread: noSpread, Rand: noDraw})
}

// startWith runs a reporter of src with cfg in the bubble until the test
// ends.
func startWith(t *testing.T, src Source, cfg Config) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	r, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func reports(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "pleg_kube_reports_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// advance sleeps d in the bubble and lets every goroutine settle.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestConditionFollowsTheGenerator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPIServer(node1())
		src := &source{}
		reg := prometheus.NewRegistry()
		src.set(func(s *pleg.Status) {
			*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute}
		})
		start(t, src, api, reg)

		advance(3 * time.Second)
		if c := api.condition(t); c != nil {
			t.Fatalf("condition %+v before the first relist, want none", c)
		}

		// The first relist: healthy, since the reading that saw it, a second
		// later.
		src.set(func(s *pleg.Status) { s.LastRelist = time.Now() })
		healthyAt := time.Now().Add(DefaultInterval)
		advance(time.Second)
		c := api.condition(t)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonHealthy || !c.LastTransitionTime.Time.Equal(healthyAt) {
			t.Fatalf("condition %+v, want False %s since %v", c, ReasonHealthy, healthyAt)
		}

		// A pod hangs: the condition turns on at the next reading, at once
		// since the last write is older than the write interval.
		src.set(func(s *pleg.Status) {
			s.LastRelist = time.Now()
			s.FailingPods = []pleg.PodFailure{{UID: "u1", Name: "web", Namespace: "shop", Since: time.Now().Add(-10 * time.Second), Deadline: true, Err: errors.New("pod inspection timed out")}}
		})
		hungAt := time.Now().Add(DefaultInterval)
		advance(5 * time.Second)
		c = api.condition(t)
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonPodStatusHung || !strings.HasPrefix(c.Message, "pod shop/web: ") {
			t.Fatalf("condition %+v, want True %s naming shop/web", c, ReasonPodStatusHung)
		}
		if !c.LastTransitionTime.Time.Equal(hungAt) {
			t.Errorf("lastTransitionTime %v, want %v, when the verdict turned", c.LastTransitionTime, hungAt)
		}
		if got := api.events(t); strings.Join(got, ";") != "Pod/shop/web Warning PodStatusHung" {
			t.Errorf("events %q, want one PodStatusHung on the pod", got)
		}

		// Another cause while it stays on: the reason and message change,
		// lastTransitionTime stays.
		src.set(func(s *pleg.Status) { s.LastRelist = time.Now().Add(-100 * time.Second) })
		advance(6 * time.Second)
		c = api.condition(t)
		if c.Status != corev1.ConditionTrue || c.Reason != ReasonRelistNearThreshold || !c.LastTransitionTime.Time.Equal(hungAt) {
			t.Errorf("condition %+v, want True %s since %v", c, ReasonRelistNearThreshold, hungAt)
		}

		// Healthy again: off, since then; the kubelet's Ready condition
		// untouched.
		src.set(func(s *pleg.Status) { s.LastRelist, s.FailingPods = time.Now(), nil })
		offAt := time.Now().Add(DefaultInterval)
		advance(6 * time.Second)
		c = api.condition(t)
		if c.Status != corev1.ConditionFalse || c.Reason != ReasonHealthy || !c.LastTransitionTime.Time.Equal(offAt) {
			t.Errorf("condition %+v, want False since %v", c, offAt)
		}
		node, _ := api.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
		ready := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.Reason == "KubeletReady"
		})
		if len(node.Status.Conditions) != 2 || ready < 0 {
			t.Errorf("conditions %+v: want Ready kept beside pleg's", node.Status.Conditions)
		}
		if r := reports(t, reg); r[resultWritten] != 5 || r[resultRetried] != 0 || r[resultDropped] != 0 {
			t.Errorf("reports %v, want 4 condition writes and 1 event written", r)
		}

		// Nothing changes: one heartbeat every five minutes.
		before := api.condition(t).LastHeartbeatTime
		keep := func(s *pleg.Status) { s.LastRelist = time.Now() }
		for range 5 * 60 {
			src.set(keep)
			advance(time.Second)
		}
		c = api.condition(t)
		if !c.LastHeartbeatTime.After(before.Time) || !c.LastTransitionTime.Time.Equal(offAt) {
			t.Errorf("after 5 minutes: heartbeat %v (was %v), transition %v", c.LastHeartbeatTime, before, c.LastTransitionTime)
		}
		if r := reports(t, reg); r[resultWritten] != 6 {
			t.Errorf("reports %v, want one heartbeat in five minutes", r)
		}
	})
}

func TestConditionWritesAreRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, src, reg := healthyNode()
		var patches int
		api.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			patches++
			return false, nil, nil
		})
		start(t, src, api, reg)
		synctest.Wait()

		// The verdict flaps every second for a minute.
		for i := range 60 {
			src.set(func(s *pleg.Status) {
				s.LastRelist = time.Now()
				s.FailingPods = nil
				if i%2 == 0 {
					s.FailingPods = []pleg.PodFailure{{UID: "u1", Name: "web", Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")}}
				}
			})
			advance(time.Second)
		}
		if patches > 60/5+1 {
			t.Errorf("%d patches in a minute, want at most one per %v", patches, DefaultMinWriteInterval)
		}
		if r := reports(t, reg); r[resultDropped] == 0 {
			t.Errorf("reports %v: the verdicts superseded before they could be written count as dropped", r)
		}
	})
}

func TestAPIServerDownIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, src, reg := healthyNode()
		start(t, src, api, reg)
		advance(time.Second)
		if c := api.condition(t); c == nil || c.Status != corev1.ConditionFalse {
			t.Fatalf("condition %+v, want False", c)
		}

		api.setDown(true)
		hungAt := time.Now().Add(DefaultInterval)
		src.set(func(s *pleg.Status) {
			s.FailingPods = []pleg.PodFailure{{UID: "u1", Name: "web", Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")}}
		})
		for range 60 {
			src.set(func(s *pleg.Status) { s.LastRelist = time.Now() })
			advance(time.Second)
		}
		r := reports(t, reg)
		// The condition's retries back off from 5 s to 30 s: 5, 10, 20,
		// 30 s (each with up to 20% more), so 4 or 5 in the minute; the
		// event's come every 10 s or so, 5 to 7.
		if r[resultRetried] < 8 || r[resultRetried] > 13 {
			t.Errorf("reports %v after a minute down: want the condition and the event retried with backoff", r)
		}

		api.setDown(false)
		advance(30 * time.Second)
		c := api.condition(t)
		if c.Status != corev1.ConditionTrue || c.Reason != ReasonPodStatusHung || !c.LastTransitionTime.Time.Equal(hungAt) {
			t.Errorf("condition %+v after the API server is back: want True since %v", c, hungAt)
		}
		if got := api.events(t); strings.Join(got, ";") != "Pod/shop/web Warning PodStatusHung" {
			t.Errorf("events %q, want the PodStatusHung written late", got)
		}
		if r := reports(t, reg); r[resultDropped] != 0 {
			t.Errorf("reports %v: nothing was dropped", r)
		}
	})
}

func TestRestartKeepsTheTransitionTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		earlier := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		api := newAPIServer(node1(corev1.NodeCondition{
			Type: ConditionType, Status: corev1.ConditionTrue, Reason: ReasonPodStatusHung, Message: "pod shop/web: ...",
			LastHeartbeatTime: earlier, LastTransitionTime: earlier,
		}))
		src := &source{}
		src.set(func(s *pleg.Status) {
			*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, LastRelist: time.Now(),
				FailingPods: []pleg.PodFailure{{UID: "u1", Name: "db", Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")}}}
		})
		start(t, src, api, nil)
		advance(time.Second)
		c := api.condition(t)
		if c.Status != corev1.ConditionTrue || !strings.HasPrefix(c.Message, "pod shop/db") || !c.LastTransitionTime.Equal(&earlier) || c.LastHeartbeatTime.Equal(&earlier) {
			t.Errorf("condition %+v: want still True since %v, with the new message and heartbeat", c, earlier)
		}
	})
}

func TestEventsDroppedAfterTheRecordersTries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPIServer(node1())
		api.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection reset by peer")
		})
		api.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
			e := a.(k8stesting.CreateAction).GetObject().(*eventsv1.Event)
			if e.Regarding.Name == "bad" {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, e.Name, nil)
			}
			return false, nil, nil
		})
		src := &source{}
		reg := prometheus.NewRegistry()
		src.set(func(s *pleg.Status) {
			*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, LastRelist: time.Now(),
				FailingPods: []pleg.PodFailure{
					{UID: "u1", Name: "web", Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")},
					{UID: "u2", Name: "bad", Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")},
				}}
		})
		start(t, src, api, reg)
		advance(5 * time.Minute)
		r := reports(t, reg)
		// web: 11 tries retried, the 12th dropped; bad: refused, dropped.
		if r[resultRetried] != recorderTries-1 || r[resultDropped] != 2 {
			t.Errorf("reports %v: want %d retries and 2 drops", r, recorderTries-1)
		}
	})
}

func TestPodEventsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPIServer(node1())
		src := &source{}
		reg := prometheus.NewRegistry()
		var failing []pleg.PodFailure
		for _, name := range strings.Fields("a b c d e f g h i j k l m n o p q r s t") {
			failing = append(failing, pleg.PodFailure{UID: "u-" + name, Name: name, Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")})
		}
		src.set(func(s *pleg.Status) {
			*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, LastRelist: time.Now(), FailingPods: failing}
		})
		start(t, src, api, reg)
		advance(time.Second)
		if got := len(api.events(t)); got != DefaultPodEventBurst {
			t.Errorf("%d events for 20 pods hung at once, want the burst of %d", got, DefaultPodEventBurst)
		}
		if r := reports(t, reg); r[resultDropped] != 20-DefaultPodEventBurst {
			t.Errorf("reports %v: want the events over the bound dropped", r)
		}
	})
}

func TestNewValidates(t *testing.T) {
	api := newAPIServer()
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no client", Config{NodeName: "n"}, "no client"},
		{"no node", Config{Client: api}, "no node name"},
		{"bad node", Config{Client: api, NodeName: "Node_1"}, `node name "Node_1"`},
		{"negative", Config{Client: api, NodeName: "n", Grace: -1}, "Grace -1ns"},
		{"negative spread", Config{Client: api, NodeName: "n", Spread: -time.Second}, "Spread -1s"},
	} {
		if _, err := New(&source{}, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := New(&source{}, Config{Client: api, NodeName: "n", Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "pleg_kube_reports_total"); n != 3 {
		t.Errorf("%d series of pleg_kube_reports_total before any report, want written, retried and dropped at 0", n)
	}
}

func TestWritesWithoutGetOnNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPIServer(node1())
		api.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "node-1", errors.New("no get"))
		})
		src := &source{}
		src.set(func(s *pleg.Status) {
			*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, LastRelist: time.Now()}
		})
		start(t, src, api, nil)
		advance(time.Second)
		if c := api.condition(t); c == nil || c.Status != corev1.ConditionFalse {
			t.Errorf("condition %+v: want it written without reading the node first", c)
		}
	})
}

// healthyNode is an API server holding node-1 and a generator that relists
// as it should, with the registry for the reporter's counters.
func healthyNode() (*apiServer, *source, *prometheus.Registry) {
	src := &source{}
	src.set(func(s *pleg.Status) {
		*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, LastRelist: time.Now()}
	})
	return newAPIServer(node1()), src, prometheus.NewRegistry()
}

// TestConditionGaugeTellsWhatWasWritten reads pleg_node_condition: none
// before a write, then the status and reason on the node, kept while the
// API server is down (the node still shows the old one), and the one a
// restarted pleg finds there.
func TestConditionGaugeTellsWhatWasWritten(t *testing.T) {
	gauge := func(status, reason string) string {
		if status == "" {
			return ""
		}
		return `
# HELP pleg_node_condition 1, labelled with the status and reason of the PLEGDegraded node condition pleg last wrote to the Kubernetes API (True: a problem, named by the reason).
# TYPE pleg_node_condition gauge
pleg_node_condition{condition="PLEGDegraded",reason="` + reason + `",status="` + status + `"} 1
`
	}
	check := func(t *testing.T, reg *prometheus.Registry, status, reason string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(gauge(status, reason)), "pleg_node_condition"); err != nil {
			t.Error(err)
		}
	}
	hung := func(s *pleg.Status) {
		s.LastRelist = time.Now()
		s.FailingPods = []pleg.PodFailure{{UID: "u1", Name: "web", Namespace: "shop", Since: time.Now(), Deadline: true, Err: errors.New("hung")}}
	}
	synctest.Test(t, func(t *testing.T) {
		api := newAPIServer(node1())
		src, reg := &source{}, prometheus.NewRegistry()
		src.set(func(s *pleg.Status) {
			*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute}
		})
		start(t, src, api, reg)
		advance(3 * time.Second)
		check(t, reg, "", "") // nothing to say yet, nothing written

		src.set(func(s *pleg.Status) { s.LastRelist = time.Now() })
		advance(2 * time.Second)
		check(t, reg, "False", ReasonHealthy)

		api.setDown(true)
		src.set(hung)
		advance(10 * time.Second)
		check(t, reg, "False", ReasonHealthy)

		api.setDown(false)
		for range 60 {
			src.set(hung)
			advance(time.Second)
		}
		check(t, reg, "True", ReasonPodStatusHung)
	})
	t.Run("after a restart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			now := metav1.Now()
			api := newAPIServer(node1(corev1.NodeCondition{
				Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonHealthy, Message: "relisting keeps within its threshold and every pod's status calls answer",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}))
			src, reg := &source{}, prometheus.NewRegistry()
			src.set(func(s *pleg.Status) {
				*s = pleg.Status{Mode: pleg.ModeGeneric, RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, LastRelist: time.Now()}
			})
			var patches int
			api.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				return false, nil, nil
			})
			start(t, src, api, reg)
			advance(2 * time.Second)
			check(t, reg, "False", ReasonHealthy)
			if patches != 0 {
				t.Errorf("%d patches: the condition on the node was already pleg's verdict", patches)
			}
		})
	})
}

// Issue 22 found that a pleg that stopped left its condition False
// (healthy) forever. As it stops, the condition turns Unknown, since
// then, with a reason; an API server that refuses it costs the stop
// nothing but a dropped write.
func TestStopSetsTheConditionUnknown(t *testing.T) {
	for _, down := range []bool{false, true} {
		t.Run(fmt.Sprintf("API server down %v", down), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api, src, reg := healthyNode()
				r, err := New(src, Config{NodeName: "node-1", Client: api, Registerer: reg, Spread: noSpread, Rand: noDraw,
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- r.Run(ctx) }()
				advance(time.Second)
				healthy := api.condition(t)
				if healthy == nil || healthy.Status != corev1.ConditionFalse {
					t.Fatalf("condition %+v, want False", healthy)
				}
				advance(time.Minute)

				api.setDown(down)
				stoppedAt := time.Now()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if took := time.Since(stoppedAt); took > DefaultStopTimeout {
					t.Errorf("Run took %v to return after its context ended, more than %v", took, DefaultStopTimeout)
				}
				api.setDown(false)
				c := api.condition(t)
				if down {
					if c.Status != corev1.ConditionFalse {
						t.Errorf("condition %+v, yet the API server was down", c)
					}
					if r := reports(t, reg); r[resultDropped] != 1 {
						t.Errorf("reports %v, want the last write dropped", r)
					}
					return
				}
				if c.Status != corev1.ConditionUnknown || c.Reason != ReasonStopped || !strings.Contains(c.Message, "pleg stopped at ") ||
					!c.LastTransitionTime.Time.Equal(stoppedAt) || !c.LastHeartbeatTime.Time.Equal(stoppedAt) {
					t.Errorf("condition after the stop %+v, want Unknown %s since %v", c, ReasonStopped, stoppedAt)
				}
				node, _ := api.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
				ready := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
					return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
				})
				if len(node.Status.Conditions) != 2 || ready < 0 {
					t.Errorf("conditions %+v: want the kubelet's Ready left alone", node.Status.Conditions)
				}
			})
		})
	}
}
