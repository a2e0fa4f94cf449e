// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Build identifies a pleg binary and the runtime it watches, for
// pleg_build_info.
type Build struct {
	Version, Revision, GoVersion string
	// RuntimeName and RuntimeVersion are what the runtime's Version call
	// answered; empty until it has.
	RuntimeName, RuntimeVersion string
}

// BuildInfo is the collector of pleg_build_info: one series of value 1
// whose labels say which pleg runs over which runtime, to join onto other
// series (`* on(instance) group_left(version) pleg_build_info`) or to
// count versions across a fleet. There is one series at a time, so that a
// runtime upgraded under a running pleg leaves no old version behind.
type BuildInfo struct {
	desc *prometheus.Desc

	mu      sync.Mutex
	current Build
}

// NewBuildInfo returns the collector of b and registers it on reg, unless
// reg is nil.
func NewBuildInfo(reg prometheus.Registerer, b Build) (*BuildInfo, error) {
	bi := &BuildInfo{
		desc: prometheus.NewDesc("pleg_build_info",
			"1, labelled with pleg's version, revision and Go version, and the name and version of the runtime it watches "+
				"(empty until the runtime answered its Version call).",
			[]string{"version", "revision", "goversion", "runtime", "runtime_version"}, nil),
		current: b,
	}
	if reg == nil {
		return bi, nil
	}
	return bi, reg.Register(bi)
}

// Set replaces what the series tells.
func (bi *BuildInfo) Set(b Build) {
	bi.mu.Lock()
	defer bi.mu.Unlock()
	bi.current = b
}

// Current is what the series tells.
func (bi *BuildInfo) Current() Build {
	bi.mu.Lock()
	defer bi.mu.Unlock()
	return bi.current
}

// Describe implements prometheus.Collector.
func (bi *BuildInfo) Describe(ch chan<- *prometheus.Desc) { ch <- bi.desc }

// Collect implements prometheus.Collector.
func (bi *BuildInfo) Collect(ch chan<- prometheus.Metric) {
	b := bi.Current()
	ch <- prometheus.MustNewConstMetric(bi.desc, prometheus.GaugeValue, 1,
		b.Version, b.Revision, b.GoVersion, b.RuntimeName, b.RuntimeVersion)
}
