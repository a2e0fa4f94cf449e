// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A daemon's /metrics is outside data: whatever it holds, reading it
// fills the report with finite numbers (JSON has no NaN) or says what is
// wrong, never panics.
func FuzzReadMetrics(f *testing.F) {
	for _, seed := range []string{
		`# TYPE kubelet_pleg_relist_duration_seconds histogram
kubelet_pleg_relist_duration_seconds_bucket{le="0.005"} 90
kubelet_pleg_relist_duration_seconds_bucket{le="0.5"} 100
kubelet_pleg_relist_duration_seconds_bucket{le="+Inf"} 100
kubelet_pleg_relist_duration_seconds_sum 3.4
kubelet_pleg_relist_duration_seconds_count 100
# TYPE kubelet_pleg_last_seen_seconds gauge
kubelet_pleg_last_seen_seconds 1.7956e+09
# TYPE pleg_relist_in_flight gauge
pleg_relist_in_flight 1
# TYPE pleg_relist_started_timestamp_seconds gauge
pleg_relist_started_timestamp_seconds 1.7956e+09
# TYPE pleg_mode gauge
pleg_mode{mode="evented"} 1
pleg_mode{mode="generic"} 0
# TYPE pleg_pod_inspection_failures_total counter
pleg_pod_inspection_failures_total{reason="deadline"} 3
# TYPE kubelet_pleg_discard_events counter
kubelet_pleg_discard_events 0
`,
		"kubelet_pleg_last_seen_seconds NaN\nkubelet_pleg_relist_duration_seconds_count 1\n",
		"# TYPE kubelet_pleg_relist_duration_seconds histogram\nkubelet_pleg_relist_duration_seconds_bucket{le=\"+Inf\"} -5\n",
		"pleg_relist_in_flight +Inf\npleg_relist_started_timestamp_seconds -Inf\n",
		"pleg_pod_inspection_failures_total{reason=\"error\"} NaN\nkubelet_pleg_discard_events +Inf\n",
		"{not metrics}\n",
		"",
	} {
		f.Add(seed)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC))
	f.Fuzz(func(t *testing.T, text string) {
		d := &Daemon{URL: "http://127.0.0.1:9847"}
		readMetrics(d, []byte(text), clk)
		if _, err := json.Marshal(d); err != nil {
			t.Fatalf("the daemon's figures do not make JSON: %v\n%+v", err, d)
		}
		finite(t, reflect.ValueOf(*d))
	})
}

// finite fails the test for a float field of v that is NaN, infinite or
// negative: a count, a duration or an age.
func finite(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			t.Fatalf("figure %v", f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			finite(t, v.Field(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			finite(t, it.Value())
		}
	}
}
