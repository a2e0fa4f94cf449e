// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"path/filepath"

	"github.com/plegkit/pleg/internal/version"
	"github.com/plegkit/pleg/otlpexport"
)

// OTLP configures the export of the journal's events to an OpenTelemetry
// Collector (package otlpexport). It is off unless Transport.Endpoint is
// set.
type OTLP struct {
	Transport otlpexport.TransportOptions
	// MaxBatch bounds a request's records; default
	// otlpexport.DefaultMaxBatch.
	MaxBatch int
	// NodeName names the node in the records' resource.
	NodeName string
}

// newExporter creates the exporter if one is asked for. Its cursor is in
// the state directory, or in memory without one: then a restart exports
// again what the journal holds, which is itself in memory.
func (d *Daemon) newExporter() error {
	cfg := d.cfg
	if cfg.OTLP.Transport.Endpoint == "" {
		return nil
	}
	client, err := otlpexport.NewClient(cfg.OTLP.Transport)
	if err != nil {
		return err
	}
	var cursor otlpexport.Cursor = &otlpexport.MemoryCursor{}
	if st := d.Journal.Status(); st.Persistent {
		cursor = otlpexport.FileCursor{Path: filepath.Join(cfg.StateDir, otlpexport.CursorFile)}
	} else {
		cfg.Logger.Warn("The OTLP export cursor is kept in memory, as the journal is: a restart exports again "+
			"what the new journal holds, and what the old one held and had not sent is lost",
			"stateDir", cfg.StateDir)
	}
	exp, err := otlpexport.New(d.Journal, otlpexport.Options{
		Client:     client,
		Cursor:     cursor,
		Resource:   otlpexport.Resource{NodeName: cfg.OTLP.NodeName, Version: version.Get().Version},
		MaxBatch:   cfg.OTLP.MaxBatch,
		Logger:     cfg.Logger.With("component", "otlp-export"),
		Registerer: d.Registry,
	})
	if err != nil {
		_ = client.Close()
		return err
	}
	d.exporter = exp
	return nil
}

// startExporter runs the exporter, if any, and returns what stops it.
func (d *Daemon) startExporter() (stop func()) {
	if d.exporter == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.exporter.Run(ctx) // returns nil when stopped
	}()
	return func() {
		cancel()
		<-done
		_ = d.exporter.Close() // connections only: nothing is lost
	}
}
