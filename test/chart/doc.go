// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package chart tests the Helm chart (charts/pleg) with helm's Go module,
// as `helm lint` and `helm template` would: it lints it, renders it with
// its defaults and with each value set of charts/pleg/ci, and checks the
// renders against golden files (testdata/), which test/kube applies to a
// real API server; deploy/'s plain manifests are the default render. Its
// subpackage dashboard is pleg's Grafana dashboard, written with Grafana's
// foundation SDK. It is a module of its own so that neither the product's
// module nor test/kube's (whose build list builds kube-apiserver) carries
// helm's and Grafana's dependencies.
//
// go test ./... -update (make generate) rewrites every generated file.
package chart
