// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/plegkit/pleg", Version: "v0.1.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	embedded := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "example.com/agent", Version: "v3.0.0"},
		Deps:      []*debug.Module{{Path: "github.com/plegkit/pleg", Version: "v0.1.0"}},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "the agent's commit"}},
	}
	checkout := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	for _, tc := range []struct {
		name     string
		ver, rev string
		bi       *debug.BuildInfo
		want     Info
	}{
		{"stamped by Go", "", "", stamped, Info{"v0.1.0", "0123abcd-dirty", "go1.26.8"}},
		{"set at link time", "v0.2.0", "feed", stamped, Info{"v0.2.0", "feed", "go1.26.8"}},
		{"embedded in another program", "", "", embedded, Info{"v0.1.0", "unknown", "go1.26.8"}},
		{"a checkout built without VCS stamping", "", "", checkout, Info{"(devel)", "unknown", "go1.26.8"}},
		{"no build info", "", "", nil, Info{"(devel)", "unknown", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuildInfo(tc.ver, tc.rev, func() (*debug.BuildInfo, bool) { return tc.bi, tc.bi != nil })
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
