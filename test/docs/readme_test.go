// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeExample keeps the README's library example identical to
// Example, which go test runs and checks.
func TestReadmeExample(t *testing.T) {
	atRoot(t)
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(src), "func Example() {")
	if start < 0 {
		t.Fatal("no func Example in example_test.go")
	}
	example := string(src[start:])
	if !strings.Contains(string(readme), example) {
		t.Error("README.md's library example differs from func Example in example_test.go")
	}
}
