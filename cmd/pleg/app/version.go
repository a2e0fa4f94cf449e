// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg/internal/version"
)

func newVersionCommand(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of pleg and of the runtime",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if b := version.Get(); b.Revision != "unknown" {
				g.printf("pleg:    %s, revision %s (%s)\n", b.Version, b.Revision, b.GoVersion)
			} else {
				g.printf("pleg:    %s (%s)\n", b.Version, b.GoVersion)
			}
			rt, err := g.runtime(10 * time.Second)
			if err != nil {
				return err
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			v, err := rt.Version(ctx)
			if err != nil {
				return fmt.Errorf("runtime unreachable at %s: %w", g.endpoint, err)
			}
			g.printf("runtime: %s %s (CRI %s) at %s\n",
				v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion(), g.endpoint)
			// What it can do, where runtimes and versions differ.
			caps, err := rt.Detect(ctx)
			if err != nil {
				return fmt.Errorf("runtime unreachable at %s: %w", g.endpoint, err)
			}
			for _, l := range caps.Lines() {
				g.printf("  %s\n", l)
			}
			return nil
		},
	}
}
