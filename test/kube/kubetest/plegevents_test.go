// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"testing"
	"time"
)

func TestKubeletPLEGEventsTime(t *testing.T) {
	year := time.Now().Year()
	tests := []struct {
		name, line string
		want       time.Time
	}{
		{
			name: "klog header",
			line: `I1126 22:20:01.123456   4242 kubelet.go:2600] "SyncLoop (PLEG): event for pod" pod="work/crash-0" event={"ID":"u1","Type":"ContainerDied","Data":"c1"}`,
			want: time.Date(year, time.November, 26, 22, 20, 1, 123456000, time.Local),
		},
		{
			name: "no header",
			line: `"SyncLoop (PLEG): event for pod" pod="work/crash-0" event={"ID":"u1","Type":"ContainerDied","Data":"c1"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := KubeletPLEGEvents([]byte(tt.line + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				t.Fatalf("%d events, want 1", len(evs))
			}
			want := KubeletPLEGEvent{PLEGKey: PLEGKey{PodUID: "u1", Type: "ContainerDied", ID: "c1"}, Pod: "work/crash-0", At: tt.want}
			if got := evs[0]; got.PLEGKey != want.PLEGKey || got.Pod != want.Pod || !got.At.Equal(want.At) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}
