// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plegkit/pleg/test/kube/kubetest"
)

// pageLead is how long before the kubelet's NotReady the first page must
// fire: time for a person to look before the node's pods are evicted.
const pageLead = 60 * time.Second

// plegNotHealthy is the kubelet's words when its PLEG fails its check.
const plegNotHealthy = "PLEG is not healthy"

// row is what one cause showed, from its fault: the columns of
// docs/incidents.md's table.
type row struct {
	name, runtime string
	// condAt and condReason: pleg's PLEGDegraded turned True.
	condAt     time.Duration
	condReason string
	// pageAt and pageName: the first critical alert fired.
	pageAt   time.Duration
	pageName string
	// notReadyAt and notReadyMsg: the kubelet's Ready turned False;
	// plegAt: its message first said "PLEG is not healthy".
	notReadyAt  time.Duration
	notReadyMsg string
	plegAt      time.Duration
	waited      time.Duration
	finding     string
	recording   string
}

func secs(d time.Duration) string { return fmt.Sprintf("%.0f s", d.Seconds()) }

func (r row) condition() string {
	if r.condAt == 0 {
		return "stays off"
	}
	return secs(r.condAt) + " " + r.condReason
}

func (r row) page() string {
	if r.pageAt == 0 {
		return "none"
	}
	return secs(r.pageAt) + " " + r.pageName
}

func (r row) kubelet() string {
	if r.notReadyAt == 0 {
		return "stays Ready (" + secs(r.waited) + ")"
	}
	s := "NotReady " + secs(r.notReadyAt) + ": " + r.notReadyMsg
	if r.plegAt != 0 {
		s += `; "PLEG is not healthy" ` + secs(r.plegAt)
	}
	return s
}

// run sets up the cause's workload on its node, waits until the node and
// pleg are healthy, applies the fault and watches the node, pleg's
// condition and the alerts until the kubelet says "PLEG is not healthy"
// (or the cause's wait is over), runs `pleg doctor` on the node and reads
// the recording, lifts the fault and waits until the node is healthy
// again.
func (e *env) run(t *testing.T, ctx context.Context, c *cause) row {
	n := e.cl.Node(c.node())
	f := &fault{t: t, env: e, node: n, dirs: e.dirs[n.Name]}
	r := row{name: c.name, runtime: "containerd " + n.Runtime.Version}
	if c.setup != nil {
		if err := c.setup(ctx, f); err != nil {
			t.Fatalf("setting up %s: %v", c.name, err)
		}
	}
	if err := e.cl.WaitNode(ctx, n.Name, "Ready with pleg's condition off", func(node *corev1.Node) bool {
		pc := kubetest.Condition(node, "PLEGDegraded")
		return kubetest.ConditionStatus(node, corev1.NodeReady) == corev1.ConditionTrue &&
			pc != nil && pc.Status == corev1.ConditionFalse
	}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if pages := e.alerts.pagesBefore(n.Name, t0); len(pages) > 0 {
		e.healthyPaged.Store(true)
		t.Errorf("pages for %s while it was healthy: %v", n.Name, pages)
	}
	lift, err := c.fault(ctx, f)
	if err != nil {
		t.Fatalf("the fault %s: %v", c.name, err)
	}
	lifted := false
	liftOnce := func() {
		if !lifted {
			lifted = true
			if err := lift(); err != nil {
				t.Errorf("lifting the fault %s: %v", c.name, err)
			}
		}
	}
	t.Cleanup(liftOnce) // whatever happens below
	t.Logf("%s: the fault is on (%s)", n.Name, c.what)

	// Watch until the kubelet says PLEG is not healthy, or the wait is
	// over: a cause that never takes the node there says so by staying
	// Ready that long.
	deadline := t0.Add(c.wait)
	lastTrace := time.Time{}
	for time.Now().Before(deadline) && (r.notReadyAt == 0 || r.plegAt == 0) {
		if time.Since(lastTrace) >= 15*time.Second {
			lastTrace = time.Now()
			e.trace(t, ctx, n.Name, time.Since(t0))
		}
		node, err := e.cl.CS.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		now := time.Since(t0)
		if err == nil {
			if pc := kubetest.Condition(node, "PLEGDegraded"); pc != nil && pc.Status == corev1.ConditionTrue && r.condAt == 0 {
				r.condAt, r.condReason = now, pc.Reason
				t.Logf("%s: PLEGDegraded True (%s) at %s: %s", n.Name, pc.Reason, secs(now), pc.Message)
			}
			if rc := kubetest.Condition(node, corev1.NodeReady); rc != nil && rc.Status != corev1.ConditionTrue {
				if r.notReadyAt == 0 {
					r.notReadyAt, r.notReadyMsg = now, rc.Message
					t.Logf("%s: the kubelet's Ready %s at %s: %s", n.Name, rc.Status, secs(now), rc.Message)
				}
				if r.plegAt == 0 && strings.Contains(rc.Message, plegNotHealthy) {
					r.plegAt = now
					t.Logf("%s: the kubelet's Ready says %q at %s: %s", n.Name, plegNotHealthy, secs(now), rc.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	r.waited = time.Since(t0)
	if p, ok := e.alerts.firstPage(n.Name, t0); ok {
		r.pageAt, r.pageName = p.at.Sub(t0), p.name
	}
	r.finding = e.doctor(t, ctx, f)
	r.recording = e.recording(t, f, c)
	kubeletLines := e.kubeletSays(n, plegNotHealthy)
	liftOnce()

	// What the cause must show.
	switch {
	case c.outcome == notReady && r.notReadyAt == 0:
		t.Errorf("%s: the kubelet kept the node Ready for %s", c.name, secs(r.waited))
	case c.outcome == notReady && r.plegAt == 0:
		t.Errorf("%s: the kubelet's NotReady never said %q in %s", c.name, plegNotHealthy, secs(r.waited))
	case c.outcome == staysReady && r.notReadyAt != 0:
		t.Errorf("%s: the kubelet turned the node NotReady (%s), which this cause is known not to do here: %s",
			c.name, secs(r.notReadyAt), r.notReadyMsg)
	}
	if r.notReadyAt != 0 {
		if r.pageAt == 0 || r.notReadyAt-r.pageAt < pageLead {
			t.Errorf("%s: the first page (%s) came less than %v before the kubelet's NotReady (%s)",
				c.name, r.page(), pageLead, secs(r.notReadyAt))
		}
		if r.condAt == 0 || r.condAt > r.notReadyAt {
			t.Errorf("%s: pleg's condition (%s) did not turn on before the kubelet's NotReady (%s)",
				c.name, r.condition(), secs(r.notReadyAt))
		}
		if r.plegAt != 0 && kubeletLines == 0 {
			t.Errorf("%s: the node said %q, the kubelet's log never did", c.name, plegNotHealthy)
		}
	}
	if len(c.findings) > 0 {
		id, _, _ := strings.Cut(r.finding, ":")
		if !slices.Contains(c.findings, id) {
			t.Errorf("%s: doctor's first finding is %q, want one of %v", c.name, r.finding, c.findings)
		}
	}

	// The node heals once the fault is lifted, with pleg's condition off:
	// the next cause, or the next run, starts from a healthy node.
	if err := e.cl.WaitNode(ctx, n.Name, "Ready again with pleg's condition off", func(node *corev1.Node) bool {
		pc := kubetest.Condition(node, "PLEGDegraded")
		return kubetest.ConditionStatus(node, corev1.NodeReady) == corev1.ConditionTrue &&
			pc != nil && pc.Status == corev1.ConditionFalse
	}); err != nil {
		t.Error(err)
	}
	t.Logf("%s: %s | %s | %s | %s | %s | %s", c.name, r.runtime, r.condition(), r.page(), r.kubelet(), r.finding, r.recording)
	return r
}

// trace logs what pleg's series say of the runtime at the moment: how
// long it has gone unanswered, how long its Status calls took over the
// last minute, how many pods hang. The times of docs/incidents.md come
// with them.
func (e *env) trace(t *testing.T, ctx context.Context, node string, since time.Duration) {
	q := func(expr string) string {
		v, err := e.prom.Query(ctx, expr)
		if err != nil || len(v) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(v[0].Value))
	}
	sel := fmt.Sprintf(`job="pleg",node=%q`, node)
	t.Logf("%s at %s: unanswered %s s, Status %s s on average and %s s at most over 1m, pods hung %s", node, secs(since),
		q(`pleg_runtime_unanswered_seconds{`+sel+`}`),
		q(`rate(kubelet_runtime_operations_duration_seconds_sum{`+sel+`,operation_type="status"}[1m]) / `+
			`rate(kubelet_runtime_operations_duration_seconds_count{`+sel+`,operation_type="status"}[1m])`),
		q(`histogram_quantile(1, rate(kubelet_runtime_operations_duration_seconds_bucket{`+sel+`,operation_type="status"}[1m]))`),
		q(`pleg_pods_hung{`+sel+`}`))
}

// doctor runs `pleg doctor` as an operator runs it on the node over SSH:
// the binary on the host, as root, against the node's runtime; it
// returns the first finding as "id: title".
func (e *env) doctor(t *testing.T, ctx context.Context, f *fault) string {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// The kubelet's own PLEG through the API server's node proxy, as an
	// operator with the cluster's kubeconfig reads it.
	cmd := exec.CommandContext(dctx, e.pleg, "doctor", "-r", f.node.Runtime.Endpoint, "-o", "json", "--budget", "30s",
		"--kubeconfig", e.cl.Kubeconfig, "--node-name", f.node.Name)
	out, err := cmd.Output()
	if err != nil && cmd.ProcessState == nil {
		t.Errorf("pleg doctor: %v", err)
		return "doctor failed"
	}
	var rep struct {
		Verdict  string `json:"verdict"`
		Findings []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Errorf("pleg doctor's JSON: %v\n%s", err, out)
		return "doctor's report unreadable"
	}
	if len(rep.Findings) == 0 {
		return "none (" + rep.Verdict + ")"
	}
	t.Logf("%s: pleg doctor: %s, first finding %s: %s", f.node.Name, rep.Verdict, rep.Findings[0].ID, rep.Findings[0].Title)
	return rep.Findings[0].ID + ": " + rep.Findings[0].Title
}

// recording reads the flight recordings pleg's pod kept in the node's
// state directory: the first one's trigger and what it holds.
func (e *env) recording(t *testing.T, f *fault, c *cause) string {
	dir := filepath.Join(f.dirs.state, "recordings")
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		if c.outcome == notReady {
			t.Errorf("%s: no flight recording in %s (%v)", c.name, dir, err)
		}
		return "none"
	}
	data, err := os.ReadFile(filepath.Join(dir, ents[0].Name()))
	if err != nil {
		t.Error(err)
		return "unreadable"
	}
	var rec struct {
		Trigger string `json:"trigger"`
		Reason  string `json:"reason"`
		Parts   []struct {
			Name     string `json:"name"`
			TimedOut bool   `json:"timedOut"`
			Skipped  string `json:"skipped"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Error(err)
		return "unreadable"
	}
	var parts []string
	for _, p := range rec.Parts {
		if p.Skipped == "" && !p.TimedOut {
			parts = append(parts, p.Name)
		}
	}
	t.Logf("%s: recording %s, trigger %s (%s): %s", f.node.Name, ents[0].Name(), rec.Trigger, rec.Reason, data)
	return rec.Trigger + ": " + strings.Join(parts, ", ")
}

// kubeletSays counts the kubelet's log lines that hold s.
func (e *env) kubeletSays(n *kubetest.ClusterNode, s string) int {
	log, err := n.Kubelet.Log()
	if err != nil {
		return 0
	}
	return strings.Count(string(log), s)
}
