package runtime_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func TestInstrument(t *testing.T) {
	fake := fakeruntime.New(fakeruntime.Pod{UID: "u", Name: "p", Namespace: "ns",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "s1"}},
		Containers: []fakeruntime.Container{{ID: "c1", Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	})
	reg := prometheus.NewRegistry()
	m, err := metrics.NewRuntimeOperations(reg)
	if err != nil {
		t.Fatal(err)
	}
	rt := runtime.Instrument(fake, m)
	ctx := t.Context()

	if items, err := rt.ListPodSandbox(ctx, nil); err != nil || len(items) != 1 {
		t.Fatalf("ListPodSandbox = %v, %v", items, err)
	}
	if items, err := rt.ListContainers(ctx, nil); err != nil || len(items) != 1 {
		t.Fatalf("ListContainers = %v, %v", items, err)
	}
	fake.InjectError(fakeruntime.OpListContainers, errors.New("down"))
	if _, err := rt.ListContainers(ctx, nil); err == nil {
		t.Fatal("injected error lost")
	}
	if _, err := rt.PodSandboxStatus(ctx, "s1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ContainerStatus(ctx, "gone", false); err == nil {
		t.Fatal("NotFound lost")
	}

	for op, want := range map[string][2]float64{
		runtime.OpListPodSandbox:   {1, 0},
		runtime.OpListContainers:   {2, 1},
		runtime.OpPodSandboxStatus: {1, 0},
		runtime.OpContainerStatus:  {1, 1},
	} {
		if got := testutil.ToFloat64(m.Total.WithLabelValues(op)); got != want[0] {
			t.Errorf("kubelet_runtime_operations_total{operation_type=%q} = %v, want %v", op, got, want[0])
		}
		if got := testutil.ToFloat64(m.Errors.WithLabelValues(op)); got != want[1] {
			t.Errorf("kubelet_runtime_operations_errors_total{operation_type=%q} = %v, want %v", op, got, want[1])
		}
	}
	if n := testutil.CollectAndCount(m.Duration); n != 4 {
		t.Errorf("%d duration series, want one per operation type (4)", n)
	}
	// The operation names are the kubelet's and the fake's alike.
	if runtime.OpListPodSandbox != string(fakeruntime.OpListPodSandbox) || runtime.OpContainerStatus != string(fakeruntime.OpContainerStatus) {
		t.Error("operation names drifted apart")
	}
}
