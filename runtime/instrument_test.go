// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

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
	fake.InjectError(runtime.OpListContainers, errors.New("down"))
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
}

// onlyRuntime hides the fake's event stream.
type onlyRuntime struct{ runtime.Runtime }

func TestInstrumentKeepsTheEventStreamAsItIs(t *testing.T) {
	fake := fakeruntime.New()
	fake.EnableEvents(true)
	m, err := metrics.NewRuntimeOperations(nil)
	if err != nil {
		t.Fatal(err)
	}
	src, ok := runtime.Instrument(fake, m).(runtime.EventSource)
	if !ok {
		t.Fatal("an instrumented runtime with an event stream has none")
	}
	if _, err := src.GetContainerEvents(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Total.WithLabelValues(runtime.OpGetContainerEvents)); got != 1 {
		t.Errorf("%v get_container_events counted, want 1", got)
	}
	if _, ok := runtime.Instrument(onlyRuntime{fake}, m).(runtime.EventSource); ok {
		t.Error("an instrumented runtime without an event stream claims one")
	}
}
