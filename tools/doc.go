// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package tools pins the development tools pleg's checks run, in a module
// of their own so that the product's go.mod does not carry them:
//
//	go tool -modfile=tools/go.mod golangci-lint run ./...
package tools
