package cli

import (
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
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			rt, err := g.runtime(10 * time.Second)
			if err != nil {
				return err
			}
			defer rt.Close()
			cache := podcache.New()
			opts := g.generatorOptions()
			opts.Cache = cache
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
