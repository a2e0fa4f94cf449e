package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/jsonpath"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/kubereport"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/test/kube/kubetest"
)

// TestHungPod makes one pod's status calls hang and reads, as kubectl
// describe would, the node's PLEGDegraded condition turn on naming the pod
// and a Warning event on the pod; then the pod answers and the condition
// turns off. It logs how long each took to be visible through the API
// server: with the default 10 s inspection deadline, the time it takes
// pleg to know that a call hangs, plus a reading (1 s) and a write.
func TestHungPod(t *testing.T) {
	srv, cs := apiServer(t)
	const node = "node-hung"
	createNode(t, cs, node)
	kubeconfig, err := srv.WriteKubeconfig("admin", kubetest.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	s := startSim(t, sim.Options{})
	d := runDaemon(t, s, kubeconfig, node, pleg.Options{})
	waitCondition(t, cs, node, corev1.ConditionFalse, kubereport.ReasonHealthy, time.Minute)

	hung := somePod(t, d)
	hungAt := time.Now()
	if err := s.SetFaults(sim.Faults{HangPod: hung.UID}); err != nil {
		t.Fatal(err)
	}
	// A pod is inspected when it changes; have it inspected at the next
	// relist, as a change would: from then, its status calls hang.
	d.Gen.RequestReinspect(hung.UID)

	cond, toCondition := waitCondition(t, cs, node, corev1.ConditionTrue, kubereport.ReasonPodStatusHung, 2*time.Minute)
	want := "pod " + hung.Namespace + "/" + hung.Name + ": "
	if !strings.HasPrefix(cond.Message, want) {
		t.Errorf("condition %s %q, want %s starting %q", cond.Reason, cond.Message, kubereport.ReasonPodStatusHung, want)
	}
	if lt := cond.LastTransitionTime.Time; lt.Before(hungAt.Truncate(time.Second)) || lt.After(time.Now()) {
		t.Errorf("lastTransitionTime %v: want between the hang (%v) and now", lt, hungAt)
	}
	var ev *corev1.Event
	toEvent := eventually(t, "a PodStatusHung event on the pod", 2*time.Minute, func() bool {
		ev = hasEvent(podEvents(t, cs, hung.Namespace, hung.Name, hung.UID), corev1.EventTypeWarning, kubereport.ReasonPodStatusHung)
		return ev != nil
	}) + toCondition
	if ev.ReportingController != kubereport.Component || ev.Action == "" || !strings.Contains(ev.Message, "do not answer") {
		t.Errorf("event %+v", ev)
	}
	t.Logf("pod status call hung -> condition visible: %v; -> event visible: %v", toCondition.Round(time.Millisecond), toEvent.Round(time.Millisecond))

	// The kubectl line of docs/kubernetes.md lists the node, with its
	// reason; its field selector finds the event.
	on := docNodesOn(t, cs)
	if !slices.ContainsFunc(on, func(l string) bool {
		return strings.HasPrefix(l, node+"\tTrue\t"+kubereport.ReasonPodStatusHung+"\tpod ")
	}) {
		t.Errorf("docs/kubernetes.md's kubectl line prints %q: want %s with %s", on, node, kubereport.ReasonPodStatusHung)
	}
	byController, err := cs.CoreV1().Events(hung.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "reportingComponent=" + kubereport.Component})
	if err != nil {
		t.Fatal(err)
	}
	if hasEvent(byController.Items, corev1.EventTypeWarning, kubereport.ReasonPodStatusHung) == nil {
		t.Errorf("events with reportingComponent=%s: %v", kubereport.Component, reasons(byController.Items))
	}

	// The node's other conditions are the kubelet's, untouched.
	n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.Conditions) != 2 {
		t.Errorf("conditions %+v: want the kubelet's Ready beside pleg's", n.Status.Conditions)
	}

	if err := s.SetFaults(sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the condition False once the pod answers", 2*time.Minute, func() bool {
		c := condition(t, cs, node)
		return c.Status == corev1.ConditionFalse && c.LastTransitionTime.After(cond.LastTransitionTime.Time)
	})
	// One event for the whole episode: no event per relist.
	if got := podEvents(t, cs, hung.Namespace, hung.Name, hung.UID); len(got) != 1 {
		t.Errorf("events on the pod %q, want the one PodStatusHung", reasons(got))
	}
}

// TestRuntimeStopped stops the simulated runtime for a while: the node's
// condition says the runtime does not answer, the node has a Warning
// event, and both clear when it is back.
func TestRuntimeStopped(t *testing.T) {
	srv, cs := apiServer(t)
	const node = "node-stopped"
	createNode(t, cs, node)
	kubeconfig, err := srv.WriteKubeconfig("admin", kubetest.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	s := startSim(t, sim.Options{})
	runDaemon(t, s, kubeconfig, node, pleg.Options{})
	waitCondition(t, cs, node, corev1.ConditionFalse, kubereport.ReasonHealthy, time.Minute)
	// The event stream connects once the runtime answers; its loss is
	// told on the node too.
	restarted := make(chan error, 1)
	go func() { restarted <- s.Restart(25 * time.Second) }()

	cond, _ := waitCondition(t, cs, node, corev1.ConditionTrue, kubereport.ReasonRuntimeUnreachable, time.Minute)
	if !strings.Contains(cond.Message, "does not answer") {
		t.Errorf("condition %s %q", cond.Reason, cond.Message)
	}
	eventually(t, "a RuntimeUnreachable event on the node", time.Minute, func() bool {
		return hasEvent(nodeEvents(t, cs, node), corev1.EventTypeWarning, kubereport.ReasonRuntimeUnreachable) != nil
	})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	waitCondition(t, cs, node, corev1.ConditionFalse, kubereport.ReasonHealthy, time.Minute)
	eventually(t, "a RelistRecovered event on the node", time.Minute, func() bool {
		return hasEvent(nodeEvents(t, cs, node), corev1.EventTypeNormal, kubereport.ReasonRelistRecovered) != nil
	})
	events := nodeEvents(t, cs, node)
	if hasEvent(events, corev1.EventTypeWarning, kubereport.ReasonEventStreamLost) == nil {
		t.Errorf("node events %v: want the event stream's loss told", reasons(events))
	}
}

// somePod is one of the pods the daemon's cache holds.
func somePod(t *testing.T, d *daemon.Daemon) *runtime.PodStatus {
	t.Helper()
	for _, e := range d.Cache.GetAll() {
		if e.Status.Name != "" {
			return e.Status
		}
	}
	t.Fatal("no pod in the cache")
	return nil
}

func reasons(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprintf("%s %s x%d: %s", e.Type, e.Reason, max(e.Count, 1), e.Message))
	}
	return out
}

// docNodesOn runs the kubectl line of docs/kubernetes.md that lists the
// nodes whose condition is on: its jsonpath template, as kubectl applies it
// to the list of nodes, then its awk filter. It returns the lines printed.
func docNodesOn(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^kubectl get nodes -o jsonpath='([^']+)' \| awk -F'\\t' '\$2 == "True"'$`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/kubernetes.md: no `kubectl get nodes -o jsonpath='...' | awk ...` line")
	}
	jp := jsonpath.New("docs")
	if err := jp.Parse(string(m[1])); err != nil {
		t.Fatalf("docs/kubernetes.md's jsonpath: %v", err)
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var obj any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := jp.Execute(&out, obj); err != nil {
		t.Fatalf("docs/kubernetes.md's jsonpath on the nodes: %v", err)
	}
	var on []string
	for line := range strings.Lines(out.String()) {
		if f := strings.Split(strings.TrimSuffix(line, "\n"), "\t"); len(f) > 1 && f[1] == "True" {
			on = append(on, strings.TrimSuffix(line, "\n"))
		}
	}
	return on
}
