// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command otelcol is the smallest OpenTelemetry Collector the export
// tests need, built from the collector's own modules: the OTLP receiver,
// the memory limiter and the file exporter, with configuration from a
// file. It is what an operator's collector would run, minus everything
// else.
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func factories() (otelcol.Factories, error) {
	recv, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	proc, err := otelcol.MakeFactoryMap[processor.Factory](memorylimiterprocessor.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exp, err := otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Receivers: recv, Processors: proc, Exporters: exp, Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}

func main() {
	info := component.BuildInfo{Command: "otelcol-pleg-test", Description: "pleg's test collector", Version: "test"}
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{
		BuildInfo: info,
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	})
	if err := cmd.Execute(); err != nil {
		log.Fatal(err)
	}
}
