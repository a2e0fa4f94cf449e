// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version tells which pleg a binary is: the version and revision
// a release build sets with -ldflags -X (deploy/Dockerfile does), else
// what Go stamped into the binary: the module's version (`go install
// ...@v0.1.0`) and the VCS revision of the checkout it was built in.
package version

import (
	"runtime/debug"
	"strings"
)

// Set at link time by release builds:
//
//	-ldflags "-X github.com/plegkit/pleg/internal/version.version=v0.1.0
//	          -X github.com/plegkit/pleg/internal/version.revision=<commit>"
var version, revision string

// Info is a build's identity.
type Info struct {
	// Version is the release ("v0.1.0"), or "(devel)" for a build from a
	// checkout.
	Version string
	// Revision is the commit, with "-dirty" when the checkout had
	// changes; "unknown" when the build did not record it.
	Revision string
	// GoVersion is the Go release that built the binary.
	GoVersion string
}

// Get returns this binary's Info.
func Get() Info {
	return fromBuildInfo(version, revision, debug.ReadBuildInfo)
}

// modulePath is pleg's module: in a program that embeds pleg, the main
// module is another, and pleg's version is that of the dependency.
const modulePath = "github.com/plegkit/pleg"

func fromBuildInfo(ver, rev string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: ver, Revision: rev}
	if bi, ok := read(); ok {
		info.GoVersion = bi.GoVersion
		main := bi.Main.Path == modulePath || bi.Main.Path == ""
		if info.Version == "" {
			info.Version = moduleVersion(bi, main)
		}
		if info.Revision == "" && main {
			// A dependency's commit is not stamped: only the main
			// module's checkout is.
			info.Revision = vcsRevision(bi.Settings)
		}
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

func moduleVersion(bi *debug.BuildInfo, main bool) string {
	if main {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// vcsRevision is the commit Go's VCS stamping recorded, marked dirty when
// the checkout had changes.
func vcsRevision(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty && !strings.HasSuffix(rev, "-dirty") {
		rev += "-dirty"
	}
	return rev
}
