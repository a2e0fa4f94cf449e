package daemon

import (
	"log/slog"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// TestHealthzFollowsAHungRuntime runs the daemon over the simulator, makes
// the runtime's container list hang, and watches /healthz turn 500 with
// the kubelet's message once the threshold passes, then 200 again once
// the runtime answers.
func TestHealthzFollowsAHungRuntime(t *testing.T) {
	latency, _ := sim.LatencyPreset("zero")
	s := simtest.Start(t, sim.Options{Pods: 3, Containers: 2, Latency: latency, Seed: 1})
	// Each runtime call gives up after a second, as --timeout 1s would.
	rt, err := cri.New(cri.Options{Endpoint: s.Endpoint(), RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })

	d, _ := runDaemon(t, Config{
		Runtime:   rt,
		Generator: pleg.Options{RelistPeriod: 100 * time.Millisecond, RelistThreshold: 2 * time.Second},
		Listen:    "127.0.0.1:0",
	})
	healthz := "http://" + d.Addr() + "/healthz"
	status := func() (int, string) { return get(t, http.DefaultClient, healthz) }

	eventually(t, "healthy", func() bool { code, _ := status(); return code == 200 })

	faults, err := sim.ParseFaults("hang=list_containers")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	unhealthy := regexp.MustCompile(`^PLEG is not healthy: pleg was last seen active (\d+\.?\d*)(ms|s) ago; threshold is 2s\n$`)
	eventually(t, "unhealthy", func() bool {
		code, body := status()
		if code == 200 {
			return false
		}
		if code != 500 || !unhealthy.MatchString(body) {
			t.Fatalf("/healthz = %d %q, want 500 with the kubelet's message", code, body)
		}
		return true
	})

	if err := s.SetFaults(sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy again", func() bool {
		code, body := status()
		return code == 200 && body == "ok\n"
	})
}
