// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// plegBinary builds cmd/pleg once for the package's tests, into the
// project's cache.
var plegBinary = sync.OnceValues(func() (string, error) {
	// In a directory of this test process's own: the runtime cache is
	// shared with other checkouts, which build their own pleg.
	bin := filepath.Join(binDir, "pleg")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/plegkit/pleg/cmd/pleg").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building pleg: %w\n%s", err, out)
	}
	return bin, nil
})

// daemonProcess is `pleg run` against a test runtime.
type daemonProcess struct {
	cmd    *exec.Cmd
	client *client.Client
	socket string
	done   chan struct{} // closed when the process exited, with err set
	err    error
}

// daemonDir is a directory of a daemon's own, for its socket and its
// state: a free TCP port picked here could be taken by the time the
// daemon binds it, by the daemon of another runtime's test among others.
func daemonDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pleg-d-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func startDaemon(t *testing.T, in *runtimetest.Instance) *daemonProcess {
	t.Helper()
	return startDaemonIn(t, in, daemonDir(t))
}

// startDaemonIn starts `pleg run` serving on dir/pleg.sock, with its
// journal in dir/state, and waits until it is healthy. Another daemon
// started in the same dir goes on from the journal of the last.
func startDaemonIn(t *testing.T, in *runtimetest.Instance, dir string, args ...string) *daemonProcess {
	t.Helper()
	bin, err := plegBinary()
	if err != nil {
		t.Fatal(err)
	}
	addr := "unix://" + filepath.Join(dir, "pleg.sock")
	cmd := exec.Command(bin, append([]string{"run", "-r", in.Endpoint, "--listen", addr, "--relist-period", "100ms",
		"--state-dir", filepath.Join(dir, "state")}, args...)...)
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemonProcess{cmd: cmd, socket: filepath.Join(dir, "pleg.sock"), done: make(chan struct{})}
	if d.client, err = client.New(addr, client.Options{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(d.kill)
	wait(t, "the daemon healthy", func() bool {
		h, err := d.client.Health(t.Context())
		return err == nil && h.OK
	})
	return d
}

// kill kills the daemon with SIGKILL and waits for it to be gone.
func (d *daemonProcess) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// get is a plain GET of the daemon's path, for what api/client does not
// read.
func (d *daemonProcess) get(path string) (*http.Response, error) {
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	return c.Get("http://pleg" + path)
}

// eventReader reads a /v1/events stream in the background.
type eventReader struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	events []api.Event
	ended  chan error
}

func readEvents(t *testing.T, d *daemonProcess, r client.EventsRequest) *eventReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := d.client.Events(ctx, r)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	er := &eventReader{cancel: cancel, ended: make(chan error, 1)}
	go func() {
		defer func() { _ = stream.Close() }()
		for {
			ev, err := stream.Next()
			if err != nil {
				er.ended <- err
				return
			}
			er.mu.Lock()
			er.events = append(er.events, ev)
			er.mu.Unlock()
		}
	}()
	t.Cleanup(cancel)
	return er
}

func (r *eventReader) got() []api.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func kinds(events []api.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.Type+" "+ev.ContainerName)
	}
	return out
}

// TestDaemonAgainstRuntime runs `pleg run` against the runtime: the
// events a client reads from /v1/events match the scenario, a client that
// resumes with since= gets the rest without duplicates or holes, and
// SIGTERM ends the streams cleanly and exits 0.
func TestDaemonAgainstRuntime(t *testing.T) {
	onEachRuntime(t, func(t *testing.T, in *runtimetest.Instance) {
		d := startDaemon(t, in)
		pod := newPod("daemon")
		ofPod := client.EventsRequest{Filter: api.Filter{Pods: []string{pod.UID}}}
		all := readEvents(t, d, ofPod)
		early := readEvents(t, d, ofPod)

		sb, err := in.RunPod(ctx(t), pod)
		must(t, err)
		_, err = in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "app", Args: sleeping})
		must(t, err)
		wait(t, "the sandbox and app started", func() bool { return len(all.got()) == 2 })

		// The early client leaves after what it has read so far...
		wait(t, "the early client caught up", func() bool { return len(early.got()) == 2 })
		early.cancel()
		resumeAfter := early.got()[1].Seq

		// ...more happens...
		job, err := in.RunContainer(ctx(t), sb, pod, runtimetest.ContainerSpec{Name: "job", Args: []string{"exit", "4", "500ms"}})
		must(t, err)
		wait(t, "the job started and died", func() bool { return len(all.got()) == 4 })
		must(t, in.RemoveContainer(ctx(t), job))
		wait(t, "the job removed", func() bool { return len(all.got()) == 5 })

		// The job's Died says why, as the runtime told it, through the
		// daemon's journal and API.
		if died := all.got()[3]; died.ExitCode == nil || *died.ExitCode != 4 || died.Reason != "Error" ||
			died.Image == "" || died.Attempt == nil || died.FinishedAt == nil {
			t.Errorf("the job's Died: %+v; want exit code 4, reason Error, an image, attempt 0 and finishedAt", died)
		}
		want := []string{"ContainerStarted app", "ContainerStarted ", "ContainerStarted job", "ContainerDied job", "ContainerRemoved job"}
		got := kinds(all.got())
		slices.Sort(got[:2]) // a relist orders a new pod's containers before its sandbox, but sandbox and app may come in one relist or two
		if !slices.Equal(got, slices.Concat([]string{"ContainerStarted ", "ContainerStarted app"}, want[2:])) {
			t.Errorf("events %v, want %v", kinds(all.got()), want)
		}

		// ...and the early client comes back where it left.
		resumed := readEvents(t, d, client.EventsRequest{Filter: ofPod.Filter, Since: resumeAfter})
		wait(t, "the resumed client caught up", func() bool { return len(resumed.got()) == 3 })
		// DeepEqual: events hold pointers (attempt, exit code), equal
		// when what they point to is.
		if joined := append(early.got(), resumed.got()...); !reflect.DeepEqual(joined, all.got()) {
			t.Errorf("resumed stream: %v then %v, want exactly %v", kinds(early.got()), kinds(resumed.got()), kinds(all.got()))
		}

		// /healthz?verbose tells what the runtime can do, as the daemon's
		// calls showed it (api/client reads the plain /healthz only).
		events, _, streaming, _ := wantCapabilities(in.Spec)
		for _, want := range []string{"runtime event stream: " + string(events), "runtime streaming lists: " + string(streaming), "runtime list sizes: sandboxes "} {
			wait(t, "/healthz?verbose to say "+want, func() bool {
				resp, err := d.get("/healthz?verbose")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return strings.Contains(string(body), "\n"+want)
			})
		}

		// SIGTERM: open streams end cleanly, the daemon exits 0.
		must(t, d.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-d.done:
			if d.err != nil {
				t.Errorf("pleg run after SIGTERM: %v, want exit 0", d.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("pleg run did not exit after SIGTERM")
		}
		select {
		case err := <-all.ended:
			if !errors.Is(err, io.EOF) {
				t.Errorf("stream ended with %v, want a clean end (EOF)", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the event stream did not end with the daemon")
		}
	})
}
