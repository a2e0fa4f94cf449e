// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pleg is the pod lifecycle event generator's binary: the node
// daemon, its CLI, the simulated runtime and the demo. See `pleg --help`.
package main

import (
	"os"

	"github.com/plegkit/pleg/cmd/pleg/app"
)

func main() { os.Exit(app.Execute()) }
