// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

// A pod that dies and goes keeps its history on the daemon: /v1/history
// tells its end, and /v1/pods/{uid} that it was removed.
func TestRemovedPodHistory(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Pod{UID: "u1", Name: "db-0", Namespace: "data",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []fakeruntime.Container{{ID: "c1", Name: "postgres", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	})
	_, c, base, _ := startDaemonCfg(t, Config{Runtime: rt, Listen: "127.0.0.1:0", EventRetention: 24 * time.Hour})
	eventually(t, "ready", func() bool { code, _ := get(t, c, base+"/readyz"); return code == 200 })
	if err := rt.SetContainerState("c1", runtimeapi.ContainerState_CONTAINER_EXITED, 3); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the death in the history", func() bool {
		_, body := get(t, c, base+"/v1/history?uid=u1&type=ContainerDied")
		return strings.Contains(body, `"exitCode": 3`)
	})
	rt.RemovePod("u1")
	var gone api.RemovedPod
	eventually(t, "410 for the removed pod", func() bool {
		code, body := get(t, c, base+"/v1/pods/u1")
		return code == 410 && json.Unmarshal([]byte(body), &gone) == nil
	})
	if gone.Name != "db-0" || gone.Namespace != "data" || gone.RemovedAt.IsZero() || len(gone.Containers) == 0 {
		t.Errorf("removed pod: %+v", gone)
	}
	_, body := get(t, c, base+"/v1/history?namespace=data&name=db-0")
	var h api.History
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range h.Events {
		types = append(types, ev.Type)
	}
	if got := strings.Join(types, " "); !strings.Contains(got, "ContainerDied") || !strings.HasSuffix(got, "ContainerRemoved") {
		t.Errorf("history of data/db-0: %s; want its death and its removal last", got)
	}
	if code, _ := get(t, c, base+"/v1/pods/u-never"); code != 404 {
		t.Errorf("a pod never seen: %d, want 404", code)
	}
}
