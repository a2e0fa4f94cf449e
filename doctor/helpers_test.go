package doctor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/runtime/cri"
	"github.com/plegkit/pleg/sim"
	"github.com/plegkit/pleg/sim/simtest"
)

// startSim serves a simulated runtime for the test and returns it with
// the raw CRI client pleg doctor would use.
func startSim(t testing.TB, opts sim.Options) (*sim.Sim, runtimeapi.RuntimeServiceClient) {
	t.Helper()
	s := simtest.Start(t, opts)
	return s, dial(t, s.Endpoint())
}

// dial returns the raw client pleg doctor uses: our CRI adapter's.
func dial(t testing.TB, endpoint string) runtimeapi.RuntimeServiceClient {
	t.Helper()
	rt, err := cri.New(cri.Options{Endpoint: endpoint, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt.Client()
}

// testContext bounds a test generously: a functional wait, never a
// measurement.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// podUIDs lists the simulator's pod UIDs in its list order.
func podUIDs(t testing.TB, client runtimeapi.RuntimeServiceClient) []string {
	t.Helper()
	resp, err := client.ListPodSandbox(testContext(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, sb := range resp.GetItems() {
		uids = append(uids, sb.GetMetadata().GetUid())
	}
	return uids
}

// findingIDs lists the IDs of a report's findings, in rank order.
func findingIDs(r *Report) []string {
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.ID)
	}
	return ids
}

// finding returns the first finding with the ID, or nil.
func finding(r *Report, id string) *Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id {
			return &r.Findings[i]
		}
	}
	return nil
}

// diagnose runs a diagnosis that must not fail.
func diagnose(t testing.TB, client runtimeapi.RuntimeServiceClient, opts Options) *Report {
	t.Helper()
	r, err := Diagnose(testContext(t), client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
