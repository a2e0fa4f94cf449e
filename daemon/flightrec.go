// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/flightrec"
)

// FlightRecorder configures the flight recorder (package flightrec),
// which keeps the runtime's and the host's state at the onset of an
// incident in the state directory's recordings/. It needs StateDir.
type FlightRecorder struct {
	// Enabled turns it on; without a state directory it stays off, and
	// says so in the log.
	Enabled bool
	// Fraction of the health threshold past which a relist or a CRI call
	// in flight starts a recording (flightrec.DefaultFraction).
	Fraction float64
	// MinInterval is the floor between two recordings.
	MinInterval time.Duration
	// MaxCount and MaxBytes bound the recordings kept.
	MaxCount int
	MaxBytes int64
	// DebugSocket is containerd's debug socket, for its goroutine stacks.
	DebugSocket string
	// CRIOStacks asks CRI-O for its stacks with SIGUSR1 (opt-in).
	CRIOStacks bool
	// KernelLog reads /dev/kmsg (opt-in).
	KernelLog bool
}

// flightCalls returns the tracker of the generator's CRI calls. It runs
// whether or not the recorder does: the runtime's unanswered calls are
// what pleg_runtime_unanswered_since_timestamp_seconds, and so the
// earliest page, read. The recorder is told nil when it will not run.
func flightCalls(cfg Config) (calls, forRecorder *flightrec.Calls) {
	calls = flightrec.NewCalls(nil)
	if !cfg.FlightRecorder.Enabled {
		return calls, nil
	}
	if cfg.StateDir == "" {
		cfg.Logger.Info("The flight recorder is off: it keeps its recordings in the state directory, and pleg runs " +
			"without --state-dir")
		return calls, nil
	}
	return calls, calls
}

// newFlightRecorder assembles the recorder over the generator and the
// tracked calls, or returns nil when calls is nil.
func newFlightRecorder(cfg Config, calls *flightrec.Calls, gen *pleg.Generator, reg *prometheus.Registry,
	onRecording func(*flightrec.Recording, string),
) (*flightrec.Recorder, error) {
	if calls == nil {
		return nil, nil
	}
	fr := cfg.FlightRecorder
	rc := flightrec.Config{
		Dir:         filepath.Join(cfg.StateDir, flightrec.Dir),
		MaxCount:    fr.MaxCount,
		MaxBytes:    fr.MaxBytes,
		Calls:       calls,
		Source:      gen,
		DebugSocket: fr.DebugSocket,
		CRIOStacks:  fr.CRIOStacks,
		KernelLog:   fr.KernelLog,
		Fraction:    fr.Fraction,
		MinInterval: fr.MinInterval,
		Logger:      cfg.Logger.With("component", "flightrec"),
		Registerer:  reg,
		OnRecording: onRecording,
	}
	if cfg.Kubelet != nil {
		rc.Kubelet = cfg.Kubelet
	}
	if v, ok := cfg.Runtime.(flightrec.Versioner); ok {
		rc.Runtime = v
	}
	if e, ok := cfg.Runtime.(endpointer); ok {
		rc.Endpoint = e.Endpoint()
	}
	if cfg.Kube != nil {
		rc.Condition = func() bool { return conditionOn(reg) }
	}
	return flightrec.New(rc)
}

// onRecording tells a recording off the node at its onset: an event on the
// node naming its first finding (with reporting on), and its summary and
// findings to the OTLP collector (with an export), so that the evidence
// outlives a node that is drained and recycled.
func (d *Daemon) onRecording(rec *flightrec.Recording, _ string) {
	findings := doctor.RecordingFindings(rec)
	node := d.cfg.Diagnosis.Node
	if k := d.cfg.Kube; k != nil && k.Client != nil && k.NodeName != "" {
		node = k.NodeName
		recordingEvent(k, d.cfg.Logger)(rec, findings)
	}
	if d.exporter != nil {
		if node == "" {
			node = d.cfg.OTLP.NodeName
		}
		d.exporter.Notify(recordingNotice(rec, findings, node))
	}
}

// conditionOn reads pleg_node_condition, the condition the reporter last
// wrote: on when its status is True.
func conditionOn(g prometheus.Gatherer) bool {
	mfs, err := g.Gather()
	if err != nil {
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() != "pleg_node_condition" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "status" && l.GetValue() == "True" && m.GetGauge().GetValue() == 1 {
					return true
				}
			}
		}
	}
	return false
}

// recordings is what the API serves of the recorder: nil, untyped, when
// it is off.
func recordings(r *flightrec.Recorder) api.Recordings {
	if r == nil {
		return nil
	}
	return r.Store()
}

// startRecorder runs the recorder, if any, and returns what stops it.
func startRecorder(r *flightrec.Recorder, log *slog.Logger) (stop func()) {
	if r == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	log.Info("The flight recorder watches for incidents", "dir", r.Store().Dir)
	return func() {
		cancel()
		<-done
	}
}
