// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Kind is a CRI runtime's family.
type Kind string

// The runtimes the harness runs.
const (
	Containerd Kind = "containerd"
	CRIO       Kind = "crio"
)

// DebianContainerd16 is the Version of a Spec for Debian's containerd 1.6
// (package containerd of bookworm), installed with apt-get: a CRI runtime
// without GetContainerEvents.
const DebianContainerd16 = "1.6-debian"

// Spec names a runtime to run: its kind and version.
type Spec struct {
	Kind Kind
	// Version is a module version: containerd's "v1.7.35" or "v2.4.2",
	// CRI-O's "v1.36.3"; or DebianContainerd16.
	Version string
	// NoPodEvents turns CRI-O's enable_pod_events off: its event stream
	// then ends at once, and clients must relist alone.
	NoPodEvents bool
}

// String names the spec in test names and messages: "containerd-v2.4.2",
// "crio-v1.36.3", "crio-v1.36.3-nopodevents", "containerd-1.6-debian".
func (s Spec) String() string {
	name := string(s.Kind) + "-" + s.Version
	if s.NoPodEvents {
		name += "-nopodevents"
	}
	return name
}

// HasEvents reports whether the runtime keeps a container event stream
// open: every containerd from 1.7, CRI-O with pod events on.
func (s Spec) HasEvents() bool {
	switch s.Kind {
	case CRIO:
		return !s.NoPodEvents
	default:
		return s.Version != DebianContainerd16
	}
}

// Environment variables choosing the runtimes of a test run, each a
// comma-separated list of versions ("v2.4.2" or "2.4.2"); "none" runs
// none of that kind, and for containerd "all" runs
// MatrixContainerdVersions.
const (
	ContainerdVersionsEnv = "PLEG_CONTAINERD_VERSIONS"
	CRIOVersionsEnv       = "PLEG_CRIO_VERSIONS"
)

// The versions a run covers when the environment does not say: the
// oldest supported containerd (1.7, long-term support) and the newest
// one the module proxy serves, and the newest CRI-O it serves. `make
// test-matrix` sets MatrixContainerdVersions.
var (
	DefaultContainerdVersions = []string{"v1.7.35", "v2.4.2"}
	DefaultCRIOVersions       = []string{"v1.36.3"}
	// MatrixContainerdVersions is every containerd line in the field:
	// 1.7; 2.0.2, the last 2.0 that set PodSandboxStatus's Timestamp
	// without ContainersStatuses, and the newest 2.0; 2.1, 2.2, 2.3 and
	// the newest 2.x.
	MatrixContainerdVersions = []string{"v1.7.35", "v2.0.2", "v2.0.14", "v2.1.5", "v2.2.9", "v2.3.7", "v2.4.2"}
)

// Matrix returns the runtimes a test run covers: the containerd versions
// of $PLEG_CONTAINERD_VERSIONS (default DefaultContainerdVersions), then
// for each CRI-O version of $PLEG_CRIO_VERSIONS (default
// DefaultCRIOVersions) one spec with pod events on and one with them off.
func Matrix() ([]Spec, error) {
	ctd, err := versions(ContainerdVersionsEnv, DefaultContainerdVersions, MatrixContainerdVersions)
	if err != nil {
		return nil, err
	}
	crio, err := versions(CRIOVersionsEnv, DefaultCRIOVersions, DefaultCRIOVersions)
	if err != nil {
		return nil, err
	}
	var out []Spec
	for _, v := range ctd {
		if !strings.HasPrefix(v, "v1.7.") && !strings.HasPrefix(v, "v2.") {
			return nil, fmt.Errorf("runtimetest: %s: containerd %s is not supported (1.7.x or 2.x)", ContainerdVersionsEnv, v)
		}
		out = append(out, Spec{Kind: Containerd, Version: v})
	}
	for _, v := range crio {
		out = append(out, Spec{Kind: CRIO, Version: v}, Spec{Kind: CRIO, Version: v, NoPodEvents: true})
	}
	return out, nil
}

var releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// versions reads a comma-separated list of versions from env: def when
// it is unset or empty, all for "all", nothing for "none".
func versions(env string, def, all []string) ([]string, error) {
	s := strings.TrimSpace(os.Getenv(env))
	switch s {
	case "":
		return def, nil
	case "all":
		return all, nil
	case "none":
		return nil, nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		if !releaseVersion.MatchString(v) {
			return nil, fmt.Errorf("runtimetest: %s: %q is not a release version like 2.4.2", env, v)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}
