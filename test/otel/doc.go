// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package otel tests pleg's OTLP export against a real OpenTelemetry
// Collector, built by the tests from the collector's Go modules (./otelcol:
// the OTLP receiver, the memory limiter and contrib's file exporter, all
// of one release), with pleg run and pleg sim as built binaries: a
// collector outage while pods churn, SIGKILLs while exporting, retryable
// and permanent refusals, and an outage longer than the journal's
// retention. Each test reads what the collector wrote to its file and
// accounts for every sequence number the journal gave out: received,
// duplicated, or named by a loss record.
//
// It is a module of its own so that the collector's dependencies stay out
// of pleg's. Run it with `cd test/otel && go test ./...`; under CI=true a
// collector or pleg that cannot be built or started fails the tests.
package otel
