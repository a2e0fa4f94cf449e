package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/internal/runtimetest"
)

// plegBinary builds cmd/pleg once for the package's tests, into the
// project's cache.
var plegBinary = sync.OnceValues(func() (string, error) {
	cache, err := runtimetest.CacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "bin", "pleg-e2e")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/plegkit/pleg/cmd/pleg").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building pleg: %v\n%s", err, out)
	}
	return bin, nil
})

// daemonProcess is `pleg run` against a test runtime.
type daemonProcess struct {
	cmd  *exec.Cmd
	base string
	done chan struct{} // closed when the process exited, with err set
	err  error
}

func startDaemon(t *testing.T, in *runtimetest.Instance) *daemonProcess {
	t.Helper()
	bin, err := plegBinary()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	cmd := exec.Command(bin, "run", "-r", in.Endpoint, "--listen", addr, "--relist-period", "100ms")
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemonProcess{cmd: cmd, base: "http://" + addr, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.done
	})
	wait(t, "the daemon healthy", func() bool {
		resp, err := http.Get(d.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return d
}

// eventReader reads a /v1/events stream in the background.
type eventReader struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	events []api.Event
	ended  chan error
}

func readEvents(t *testing.T, url string) *eventReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	r := &eventReader{cancel: cancel, ended: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				r.ended <- err
				return
			}
			if len(line) <= 1 {
				continue
			}
			var ev api.Event
			if err := json.Unmarshal(line, &ev); err != nil {
				r.ended <- err
				return
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(cancel)
	return r
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
		all := readEvents(t, d.base+"/v1/events?pod="+pod.UID)
		early := readEvents(t, d.base+"/v1/events?pod="+pod.UID)

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

		want := []string{"ContainerStarted app", "ContainerStarted ", "ContainerStarted job", "ContainerDied job", "ContainerRemoved job"}
		got := kinds(all.got())
		slices.Sort(got[:2]) // a relist orders a new pod's containers before its sandbox, but sandbox and app may come in one relist or two
		if !slices.Equal(got, slices.Concat([]string{"ContainerStarted ", "ContainerStarted app"}, want[2:])) {
			t.Errorf("events %v, want %v", kinds(all.got()), want)
		}

		// ...and the early client comes back where it left.
		resumed := readEvents(t, fmt.Sprintf("%s/v1/events?pod=%s&since=%d", d.base, pod.UID, resumeAfter))
		wait(t, "the resumed client caught up", func() bool { return len(resumed.got()) == 3 })
		if joined := append(early.got(), resumed.got()...); !slices.Equal(joined, all.got()) {
			t.Errorf("resumed stream: %v then %v, want exactly %v", kinds(early.got()), kinds(resumed.got()), kinds(all.got()))
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
			if err != io.EOF {
				t.Errorf("stream ended with %v, want a clean end (EOF)", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the event stream did not end with the daemon")
		}
	})
}
