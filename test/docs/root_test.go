// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package docs_test

import "testing"

// atRoot makes the repository's root the test's working directory, as
// the paths of the documentation are written from there.
func atRoot(t *testing.T) {
	t.Helper()
	t.Chdir("../..")
}
