// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package render writes the report of a diagnosis (doctor.Report) for
// people and for programs: text for a terminal, JSON, and one
// self-contained HTML page with its charts. It decides nothing: the
// findings, their order and the verdict are the doctor's rules'; the
// golden files in testdata hold what each rendering looks like.
package render
