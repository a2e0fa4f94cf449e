// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// follower follows a daemon's /v1/events across its restarts, as a client
// of the API does: api/client's Follow resumes after the last event read.
type follower struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	events []api.Event
}

func follow(t *testing.T, c *client.Client, r client.EventsRequest) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan error, 1)}
	go func() {
		f.done <- c.Follow(ctx, client.FollowOptions{EventsRequest: r}, func(ev api.Event) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, ev)
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done //nolint:errcheck // waits for the goroutine; its error is the cancellation's
	})
	return f
}

func (f *follower) got() []api.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// count returns how many events of type typ f got about id.
func (f *follower) count(id, typ string) int {
	n := 0
	for _, ev := range f.got() {
		if ev.ContainerID == id && ev.Type == typ {
			n++
		}
	}
	return n
}

// TestChangesWhileStopped: what changes while the daemon is stopped (a
// container started, one killed, one removed) is reported once when it
// starts again, marked afterRestart, with the container's own times; what
// did not change is not reported again, and a client that resumes where it
// left gets no gap.
func TestChangesWhileStopped(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		for _, stop := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			t.Run(stop.String(), func(t *testing.T) {
				dir := daemonDir(t)
				d := startDaemonIn(t, in, dir)
				pod := newPod("while-stopped")
				ofPod := client.EventsRequest{Filter: api.Filter{Pods: []string{pod.UID}}}
				before := readEvents(t, d, ofPod)

				sb, err := in.RunPod(ctx(t), pod)
				must(t, err)
				run := func(name string, args ...string) string {
					id, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: name, Args: args})
					must(t, err)
					return id
				}
				killed, kept := run("killed", sleeping...), run("kept", sleeping...)
				removed := run("removed", "exit", "0")
				// A relist may not see the quick one run: its Died is enough.
				wait(t, "the pod's first events", func() bool {
					n := 0
					for _, ev := range before.got() {
						if ev.Type == "ContainerStarted" && ev.ContainerID != removed || ev.Type == "ContainerDied" {
							n++
						}
					}
					return n == 4
				})
				before.cancel()
				last := before.got()[len(before.got())-1].Seq

				if stop == syscall.SIGTERM {
					must(t, d.cmd.Process.Signal(stop))
					<-d.done
				} else {
					d.kill()
				}
				must(t, in.StopContainer(ctx(t), killed, 0))
				must(t, in.RemoveContainer(ctx(t), removed))
				started := run("started", sleeping...)

				d = startDaemonIn(t, in, dir)
				after := readEvents(t, d, client.EventsRequest{Filter: ofPod.Filter, Since: last})
				// A change after the restart comes after whatever the
				// restart reports: once it is in, all of that is too.
				late := run("late", sleeping...)
				wait(t, "the change after the restart", func() bool {
					return slices.ContainsFunc(after.got(), func(e api.Event) bool { return e.ContainerID == late })
				})
				got := after.got()
				want := map[string]string{killed: "ContainerDied", removed: "ContainerRemoved", started: "ContainerStarted", late: "ContainerStarted"}
				if len(got) != len(want) {
					t.Errorf("after the restart: %v; want %d events", describeAPI(got), len(want))
				}
				for _, ev := range got {
					if ev.Type == api.TypeGap {
						t.Errorf("a gap: %+v", ev)
						continue
					}
					if want[ev.ContainerID] != ev.Type {
						t.Errorf("unexpected %s %s", ev.Type, ev.ContainerName)
					}
					if ev.Seq <= last {
						t.Errorf("%s %s numbered %d, not after %d", ev.Type, ev.ContainerName, ev.Seq, last)
					}
					if found := ev.ContainerID != late; ev.AfterRestart != found {
						t.Errorf("%s %s: afterRestart %v, want %v", ev.Type, ev.ContainerName, ev.AfterRestart, found)
					}
					if ev.ContainerID == killed && (ev.StartedAt == nil || ev.FinishedAt == nil) {
						t.Errorf("the Died found after the restart has no container times: %+v", ev)
					}
				}
				_ = kept
			})
		}
	})
}

func describeAPI(events []api.Event) string {
	var parts []string
	for _, ev := range events {
		if ev.Type == api.TypeGap {
			parts = append(parts, fmt.Sprintf("%d:Gap(%d..%d)", ev.Seq, ev.From, ev.To))
			continue
		}
		flag := ""
		if ev.AfterRestart {
			flag = "[after restart]"
		}
		name := ev.ContainerName
		if ev.Sandbox {
			name = "sandbox"
		}
		parts = append(parts, fmt.Sprintf("%d:%s/%s%s@%s", ev.Seq, ev.Type, name, flag, ev.Time.Format("15:04:05.000")))
	}
	return strings.Join(parts, " ")
}

// TestKilledAtRandomLosesNothing kills the daemon with SIGKILL at random
// moments, 50 times, while pods churn containers on a containerd of the
// test's own and a client follows the events, resuming after each restart.
// Each container and sandbox the workload made lived a whole life, and the
// client must have read each of its steps exactly once: Started, Died and
// Removed, in sequence numbers that only grow, without a gap. Some
// containers live and go while the daemon is down: containerd keeps
// events for its next subscriber when it has none, and the daemon, which
// knows what it reported, takes that backlog as news.
func TestKilledAtRandomLosesNothing(t *testing.T) {
	spec := newestContainerd(t)
	in := privateRuntime(t, spec)
	dir := daemonDir(t)
	d := startDaemonIn(t, in, dir)
	f := follow(t, d.client, client.EventsRequest{})

	w := newChurn(in, 4)
	churnDone := make(chan error, 1)
	churnCtx, stopChurn := context.WithCancel(context.Background())
	defer stopChurn()
	go func() { churnDone <- w.run(churnCtx) }()
	wait(t, "the first event", func() bool { return len(f.got()) > 0 })

	// The pod whose containers take, after each kill, the events
	// containerd hands the dead daemon's stream (see dropDeadStream).
	sacrifice := newPod("sacrifice")
	sacrificeSandbox, err := in.RunPod(ctx(t), sacrifice)
	must(t, err)
	ignored := map[string]bool{sacrificeSandbox: true}

	const kills = 50
	rnd := mathrand.New(mathrand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var downtime []time.Duration
	var restarts [][2]time.Time
	for i := range kills {
		time.Sleep(time.Duration(rnd.Int64N(int64(1500 * time.Millisecond))))
		// No step of the workload until containerd has dropped the dead
		// daemon's stream: what it hands that stream is lost with it.
		w.gate.Lock()
		d.kill()
		down := time.Now()
		for _, id := range dropDeadStream(t, in, sacrificeSandbox, sacrifice, i) {
			ignored[id] = true
		}
		w.gate.Unlock()
		// Sometimes it stays down a while, and things happen meanwhile.
		if i%5 == 0 {
			time.Sleep(time.Duration(rnd.Int64N(int64(2 * time.Second))))
		}
		d = startDaemonIn(t, in, dir)
		downtime = append(downtime, time.Since(down))
		restarts = append(restarts, [2]time.Time{down, time.Now()})
	}
	stopChurn()
	if err := <-churnDone; err != nil {
		t.Fatalf("the workload failed: %v", err)
	}
	must(t, w.cleanUp(ctx(t)))
	ids := w.all()
	allRemoved := func() bool {
		for _, id := range ids {
			if f.count(id, "ContainerRemoved") == 0 {
				return false
			}
		}
		return true
	}
	// Not wait: if a removal never comes, the report below says which,
	// with each item's events and the restarts.
	for deadline := time.Now().Add(time.Minute); !allRemoved() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}

	got := f.got()
	var lost, repeated []string
	for _, id := range ids {
		for _, typ := range []string{"ContainerStarted", "ContainerDied", "ContainerRemoved"} {
			switch n := f.count(id, typ); {
			case n == 0:
				lost = append(lost, typ+" "+w.name(id))
			case n > 1:
				repeated = append(repeated, fmt.Sprintf("%s %s x%d", typ, w.name(id), n))
			}
		}
	}
	var afterRestart int
	for i, ev := range got {
		if ev.Type == api.TypeGap {
			t.Errorf("a gap: %+v", ev)
		}
		if i > 0 && ev.Seq <= got[i-1].Seq {
			t.Errorf("sequence went from %d to %d", got[i-1].Seq, ev.Seq)
		}
		if !slices.Contains(ids, ev.ContainerID) && !ignored[ev.ContainerID] {
			t.Errorf("an event about something the workload did not make: %+v", ev)
		}
		if ev.AfterRestart {
			afterRestart++
		}
	}
	slices.Sort(downtime)
	t.Logf("%d kills; %d containers and sandboxes, %d events read, %d found after a restart; lost %d, repeated %d; "+
		"downtime p50 %v, max %v", kills, len(ids), len(got), afterRestart, len(lost), len(repeated),
		downtime[len(downtime)/2].Round(time.Millisecond), downtime[len(downtime)-1].Round(time.Millisecond))
	if len(lost) > 0 || len(repeated) > 0 {
		t.Errorf("lost: %v\nrepeated: %v", lost, repeated)
		for _, id := range ids {
			var evs []api.Event
			for _, ev := range got {
				if ev.ContainerID == id {
					evs = append(evs, ev)
				}
			}
			if len(evs) != 3 {
				t.Logf("%s (%s): %s", w.name(id), id, describeAPI(evs))
			}
		}
		for i, at := range restarts {
			t.Logf("restart %d: killed %s, up again %s", i, at[0].Format("15:04:05.000"), at[1].Format("15:04:05.000"))
		}
	}
}

// dropDeadStream makes containerd drop the stream of the daemon just
// killed, and returns the IDs of the containers it ran to do so.
// containerd 2.x's GetContainerEvents does not watch its client: it drops
// a dead one only when it fails to send it an event, and that event, and
// any queued to it meanwhile, are lost with it and kept in no backlog.
// So the test sends it its own: it runs containers in the sacrifice pod
// until containerd's goroutine dump (its debug socket) has no
// GetContainerEvents handler left. From then on, events wait in
// containerd's backlog for the next daemon, as the test means them to.
func dropDeadStream(t *testing.T, in *runtimetest.Instance, sandbox string, pod runtimetest.PodSpec, kill int) []string {
	t.Helper()
	hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", in.DebugSocket())
	}}}
	serving := func() bool {
		resp, err := hc.Get("http://containerd/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatalf("containerd's debug socket: %v", err)
		}
		defer func() { _ = resp.Body.Close() }()
		dump, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("containerd's goroutines: %v, %s", err, resp.Status)
		}
		return bytes.Contains(dump, []byte("GetContainerEvents"))
	}
	var ran []string
	for n := 0; serving(); n++ {
		if n%10 == 0 { // an event every half second until the stream goes
			id, err := in.RunContainer(ctx(t), sandbox, pod,
				runtimetest.ContainerSpec{Name: fmt.Sprintf("s%d-%d", kill, n), Args: sleeping})
			must(t, err)
			ran = append(ran, id)
		}
		if n > 1200 {
			t.Fatal("containerd still serves the killed daemon's event stream after a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ran
}

// newestContainerd is the newest containerd of the matrix.
func newestContainerd(t *testing.T) runtimetest.Spec {
	t.Helper()
	var specs []runtimetest.Spec
	for _, s := range matrix(t) {
		if s.Kind == runtimetest.Containerd {
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		t.Fatal("no containerd in the matrix")
	}
	sort.Slice(specs, func(i, j int) bool { return versionLess(specs[i].Version, specs[j].Version) })
	return specs[len(specs)-1]
}

// versionLess compares "vX.Y.Z" versions.
func versionLess(a, b string) bool {
	var x, y [3]int
	_, _ = fmt.Sscanf(a, "v%d.%d.%d", &x[0], &x[1], &x[2])
	_, _ = fmt.Sscanf(b, "v%d.%d.%d", &y[0], &y[1], &y[2])
	return slices.Compare(x[:], y[:]) < 0
}

// privateRuntime starts an instance of spec for the test alone: no other
// client subscribes to its events.
func privateRuntime(t *testing.T, spec runtimetest.Spec) *runtimetest.Instance {
	t.Helper()
	in, err := runtimetest.Start(ctx(t), spec, runtimetest.Options{Logf: t.Logf, KeepLogs: true})
	if err != nil {
		if runtimetest.InCI() {
			t.Fatalf("starting %s: %v", spec, err)
		}
		t.Skipf("starting %s: %v", spec, err)
	}
	t.Cleanup(func() {
		if err := in.Stop(); err != nil {
			t.Errorf("stopping %s: %v", spec, err)
		}
	})
	return in
}

// churn runs pods whose containers come and go: each is created, runs,
// is stopped, and is removed, for random while, then the next.
type churn struct {
	in   *runtimetest.Instance
	pods []runtimetest.PodSpec
	// gate is held by each step of a container (read), and by a kill
	// until containerd has dropped the killed daemon's stream (write).
	gate sync.RWMutex

	mu        sync.Mutex
	names     map[string]string // every container and sandbox made, by ID
	sandboxes map[string]string // pod UID -> sandbox ID
	live      map[string]string // container ID -> state: "running", "exited"
}

func newChurn(in *runtimetest.Instance, pods int) *churn {
	c := &churn{in: in, names: map[string]string{}, sandboxes: map[string]string{}, live: map[string]string{}}
	for i := range pods {
		c.pods = append(c.pods, newPod(fmt.Sprintf("churn-%d", i)))
	}
	return c
}

func (c *churn) record(id, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names[id] = name
}

func (c *churn) setState(id, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if state == "" {
		delete(c.live, id)
	} else {
		c.live[id] = state
	}
}

// all returns the IDs of every container and sandbox made.
func (c *churn) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := range c.names {
		out = append(out, id)
	}
	return out
}

func (c *churn) name(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names[id]
}

// run churns each pod until ctx ends.
func (c *churn) run(ctx context.Context) error {
	errs := make(chan error, len(c.pods))
	for i, pod := range c.pods {
		go func() { errs <- c.churnPod(ctx, i, pod) }()
	}
	var all []error
	for range c.pods {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (c *churn) churnPod(ctx context.Context, i int, pod runtimetest.PodSpec) error {
	call, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sb, err := c.in.RunPod(call, pod)
	if err != nil {
		return err
	}
	c.record(sb, pod.Name+"/sandbox")
	c.mu.Lock()
	c.sandboxes[pod.UID] = sb
	c.mu.Unlock()
	rnd := mathrand.New(mathrand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	pause := func() error {
		// From shorter to longer than a restart takes, so that some
		// containers live and go while the daemon is down; but no two
		// steps of one container in the instant of a kill. The events a
		// daemon has read when it is killed are lost with it: one such
		// loss a container's life and the runtime's own record still tell
		// the rest; two of a container that then goes nothing can. (What
		// containerd hands the dead stream goes to dropDeadStream's
		// containers, not to these.)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200*time.Millisecond + time.Duration(rnd.Int64N(int64(time.Second)))):
			return nil
		}
	}
	for n := 0; ; n++ {
		name := fmt.Sprintf("c%d", n)
		c.gate.RLock()
		id, err := c.in.RunContainer(call, sb, pod, runtimetest.ContainerSpec{Name: name, Args: sleeping})
		c.gate.RUnlock()
		if err != nil {
			return err
		}
		c.record(id, pod.Name+"/"+name)
		c.setState(id, "running")
		if err := pause(); err != nil {
			return err
		}
		c.gate.RLock()
		err = c.in.StopContainer(call, id, 0)
		c.gate.RUnlock()
		if err != nil {
			return err
		}
		c.setState(id, "exited")
		if err := pause(); err != nil {
			return err
		}
		c.gate.RLock()
		err = c.in.RemoveContainer(call, id)
		c.gate.RUnlock()
		if err != nil {
			return err
		}
		c.setState(id, "")
		if err := pause(); err != nil {
			return err
		}
	}
}

// cleanUp ends every container and pod the workload left.
func (c *churn) cleanUp(ctx context.Context) error {
	c.mu.Lock()
	live := make(map[string]string, len(c.live))
	for id, s := range c.live {
		live[id] = s
	}
	sandboxes := slices.Collect(func(yield func(string) bool) {
		for _, sb := range c.sandboxes {
			if !yield(sb) {
				return
			}
		}
	})
	c.mu.Unlock()
	for id, state := range live {
		if state == "running" {
			if err := c.in.StopContainer(ctx, id, 0); err != nil {
				return err
			}
		}
		if err := c.in.RemoveContainer(ctx, id); err != nil {
			return err
		}
	}
	for _, sb := range sandboxes {
		if err := c.in.StopPod(ctx, sb); err != nil {
			return err
		}
		if err := c.in.RemovePod(ctx, sb); err != nil {
			return err
		}
	}
	return nil
}
