// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/podcache"
)

func newPodsCommand(g *global) *cobra.Command {
	var (
		output  string
		noTrunc bool
	)
	cmd := &cobra.Command{
		Use:   "pods",
		Short: "List the pods and their containers as one relist sees them",
		Long: `Pods relists the runtime once, inspects every pod as the generator does, and
prints the resulting pod status cache: a table of pods, each followed by its
containers, or the JSON (or YAML) of GET /v1/pods.`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return oneOf("output", output, "table", "json", "yaml")
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			rt, err := g.runtime(10 * time.Second)
			if err != nil {
				return err
			}
			defer rt.Close()
			cache := podcache.New()
			opts := g.generatorOptions()
			opts.Cache = cache
			if g.verbosity < 4 {
				// The relist's failure is the command's error, printed
				// once at the end; the generator would log it too.
				opts.Logger = slog.New(withoutErrors{opts.Logger.Handler()})
			}
			gen, err := pleg.New(rt, opts)
			if err != nil {
				return err
			}
			if err := gen.Relist(ctx); err != nil {
				return err
			}
			return printPods(g.stdout, api.NewPodList(cache.GetAll(), cache.GlobalTime()), output, noTrunc, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "show whole IDs")
	return cmd
}

// withoutErrors drops a logger's error records.
type withoutErrors struct{ slog.Handler }

func (h withoutErrors) Enabled(ctx context.Context, level slog.Level) bool {
	return level < slog.LevelError && h.Handler.Enabled(ctx, level)
}

func (h withoutErrors) WithAttrs(attrs []slog.Attr) slog.Handler {
	return withoutErrors{h.Handler.WithAttrs(attrs)}
}

func (h withoutErrors) WithGroup(name string) slog.Handler {
	return withoutErrors{h.Handler.WithGroup(name)}
}
