// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-pleg is the kubectl plugin that reads a node's pleg
// through the API server: kubectl pleg doctor NODE, kubectl pleg
// recordings NODE, kubectl pleg bundle NODE. It never goes through the
// node's container runtime, which is what is hung when it is needed.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/plegkit/pleg/cmd/kubectl-pleg/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.NewCommand(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	var code app.ExitCode
	switch {
	case errors.As(err, &code):
		os.Exit(int(code))
	case err != nil:
		fmt.Fprintln(os.Stderr, "kubectl pleg:", err)
		os.Exit(2)
	}
}
