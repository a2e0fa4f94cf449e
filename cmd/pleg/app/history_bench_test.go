// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/journal"
	"github.com/plegkit/pleg/journal/journaltest"
	"github.com/plegkit/pleg/podcache"
)

// BenchmarkHistoryCommand measures `pleg history NAMESPACE/NAME` as typed,
// but for the process's start: flags, the request to a daemon on
// loopback, its scan of a full journal (journal.DefaultMaxEvents events of
// 2,048 pods), the JSON and the table of the pod's 32 events.
func BenchmarkHistoryCommand(b *testing.B) {
	const pods = 2048
	j := journaltest.Memory(journal.DefaultMaxEvents, 1)
	batch := make([]pleg.Event, 0, 256)
	for i := range journal.DefaultMaxEvents {
		p := i % pods
		batch = append(batch, pleg.Event{Type: pleg.ContainerStarted, PodUID: fmt.Sprintf("uid-%05d", p),
			PodName: fmt.Sprintf("web-7d9c8b6f5-%05d", p), PodNamespace: "shop",
			ContainerID: fmt.Sprintf("4f1c2b3a5d6e7f8091a2b3c4d5e6f708%032d", i), ContainerName: "nginx",
			Image: "registry.example.com/shop/nginx:1.27", Observed: t0.Add(time.Duration(i) * time.Second)})
		if len(batch) == cap(batch) {
			if err := j.Commit(batch, nil); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if s := j.Status(); s.Events != journal.DefaultMaxEvents {
		b.Fatalf("the journal holds %d events, want %d", s.Events, journal.DefaultMaxEvents)
	}
	srv := api.NewServer(api.Options{Cache: podcache.New(), Journal: j, Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	for b.Loop() {
		var out, errOut bytes.Buffer
		cmd := NewCommand(&out, &errOut)
		cmd.SetArgs([]string{"history", "shop/web-7d9c8b6f5-01234", "--server", ts.URL})
		if err := cmd.Execute(); err != nil || strings.Count(out.String(), "\n") != 33 {
			b.Fatalf("%v\n%s", err, out.String())
		}
	}
}
