// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/otlpexport"
)

// otlpFlags are pleg run's --otlp-* flags: the export of the journal's
// events to an OpenTelemetry Collector, off unless --otlp-endpoint is
// given.
type otlpFlags struct {
	t        otlpexport.TransportOptions
	maxBatch int
}

func (o *otlpFlags) register(f *pflag.FlagSet) {
	f.StringVar(&o.t.Endpoint, "otlp-endpoint", "",
		"export every event to this OpenTelemetry Collector as an OTLP log record, at least once and in order, "+
			"from the journal (host:port for grpc, a URL for http/protobuf); off when empty")
	f.StringVar(&o.t.Protocol, "otlp-protocol", otlpexport.ProtocolGRPC, "OTLP protocol: grpc or http/protobuf")
	f.StringVar(&o.t.HeadersFile, "otlp-headers-file", "",
		`file of headers sent with every export ("Name: value" a line), e.g. a token; read again at each attempt`)
	f.StringVar(&o.t.CAFile, "otlp-ca-file", "", "CA certificates verifying the collector; default the system's")
	f.StringVar(&o.t.CertFile, "otlp-client-cert", "", "client certificate presented to the collector")
	f.StringVar(&o.t.KeyFile, "otlp-client-key", "", "key of --otlp-client-cert")
	f.BoolVar(&o.t.Insecure, "otlp-insecure", false, "send in plain text, for a collector on loopback")
	f.StringVar(&o.t.Compression, "otlp-compression", otlpexport.CompressionGzip, "gzip or none")
	f.IntVar(&o.maxBatch, "otlp-batch-size", otlpexport.DefaultMaxBatch, "records in an export request, at most")
}

// validate checks the flags without reading the files, which the
// daemon reads at start.
func (o *otlpFlags) validate() error {
	if o.t.Endpoint == "" {
		return nil
	}
	var errs []error
	if o.maxBatch < 1 {
		errs = append(errs, fmt.Errorf("--otlp-batch-size %d: must be at least 1", o.maxBatch))
	}
	if err := otlpexport.ValidateTransport(o.t); err != nil {
		errs = append(errs, fmt.Errorf("--otlp-*: %w", err))
	}
	return errors.Join(errs...)
}

// config is the daemon's export configuration.
func (o *otlpFlags) config(node string) daemon.OTLP {
	if o.t.Endpoint == "" {
		return daemon.OTLP{}
	}
	return daemon.OTLP{Transport: o.t, MaxBatch: o.maxBatch, NodeName: node}
}
