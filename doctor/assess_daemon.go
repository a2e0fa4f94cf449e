// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"fmt"

	"github.com/plegkit/pleg/doctor/internal/format"
)

func (a *assessment) daemon() {
	d := a.r.Daemon
	if d == nil {
		return
	}
	switch {
	case d.Error != "" && d.Health == "":
		a.add(Finding{
			ID: "daemon-unreadable", Severity: Warning,
			Title:    "The pleg daemon could not be read",
			Evidence: []string{d.URL, d.Error},
			Action:   "Check that pleg run serves there (--listen) and that this host may reach it.",
		})
		return
	case !d.Healthy:
		ev := []string{d.URL + "/healthz: " + d.Health}
		if d.RelistRunningSeconds > 0 {
			ev = append(
				ev,
				fmt.Sprintf("a relist has been running for %s", format.Duration(format.Seconds(d.RelistRunningSeconds))),
			)
		}
		a.add(Finding{
			ID: "daemon-unhealthy", Severity: Critical,
			Title:    "The pleg daemon reports itself unhealthy",
			Evidence: ev,
			Action: "The findings above say why; its logs (journalctl -u pleg or kubectl logs) name the pods it could not " +
				"inspect.",
		})
	case d.Error != "":
		a.add(Finding{
			ID: "daemon-unreadable", Severity: Warning,
			Title:    "The pleg daemon's metrics could not be read",
			Evidence: []string{d.URL, d.Error},
			Action:   "Check that the daemon serves /metrics.",
		})
	}
	if alert := format.Seconds(a.r.Projection.AlertSeconds); format.Seconds(d.RelistP99Seconds) >= alert {
		a.add(Finding{
			ID:       "daemon-relist-slow",
			Severity: Warning,
			Title: fmt.Sprintf(
				"The pleg daemon's relists take %s at p99",
				format.Duration(format.Seconds(d.RelistP99Seconds)),
			),
			Evidence: []string{
				fmt.Sprintf(
					"%d relists, p50 %s, p99 %s, estimated from kubelet_pleg_relist_duration_seconds",
					d.Relists,
					format.Duration(format.Seconds(d.RelistP50Seconds)),
					format.Duration(format.Seconds(d.RelistP99Seconds)),
				),
			},
			Action: a.slowRuntimeAction(),
		})
	}
}
