// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/api/client"
)

func newWatchCommand(g *global) *cobra.Command {
	var (
		server   serverFlags
		filter   api.Filter
		output   string
		wait     time.Duration
		sinceNow bool
		daemon   *client.Client
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print pod lifecycle events as they happen",
		Long: `Watch prints pod lifecycle events as a table (TIME TYPE NAMESPACE/POD
CONTAINER, a death with its exit code and reason), or with -o json the
objects of GET /v1/events, one a line, which also carry the container's
image, restart attempt, finish time and the runtime's message.

Without --server it runs a generator itself against --runtime-endpoint: its
first relist finds every container already there and prints it as
ContainerStarted, unless --since-now. With --server it follows a pleg daemon
from now on, resuming after the last event it printed if the connection
drops; when the daemon cannot resume there it prints a Gap.

A runtime or a daemon that does not answer is waited for: said once, and
given up after --wait (by default never).`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var errs []error
			errs = append(errs, oneOf("output", output, "table", "json"), filter.Validate())
			if wait < 0 {
				errs = append(errs, fmt.Errorf("--wait %v: must be 0 (keep waiting) or more", wait))
			}
			var err error
			daemon, err = server.client()
			return errors.Join(append(errs, err)...)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			p := &eventPrinter{w: g.stdout, json: output == "json", loc: time.Local}
			var err error
			if daemon != nil {
				err = g.follow(ctx, daemon, filter, wait, p)
			} else {
				err = g.watchInProcess(ctx, filter, wait, sinceNow, p)
			}
			if ctx.Err() != nil {
				return nil // Ctrl-C: the way to stop watching
			}
			return err
		},
	}
	f := cmd.Flags()
	server.register(f, "follow the pleg daemon at this address instead of watching the runtime")
	f.StringArrayVar(&filter.Pods, "pod", nil, "only events of this pod (UID or name); repeatable")
	f.StringArrayVar(&filter.Namespaces, "namespace", nil, "only events of pods in this namespace; repeatable")
	f.StringArrayVar(&filter.Types, "type", nil, "only events of this type; repeatable")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	f.DurationVar(&wait, "wait", 0, "give up when the runtime or the daemon has not answered for this long (0: keep "+
		"waiting)")
	f.BoolVar(&sinceNow, "since-now", false, "without --server: print only changes after the first relist, not every "+
		"container already there")
	return cmd
}

// watchInProcess runs a generator and prints what it delivers.
func (g *global) watchInProcess(
	ctx context.Context,
	filter api.Filter,
	wait time.Duration,
	sinceNow bool,
	p *eventPrinter,
) error {
	rt, err := g.servedRuntime(2 * time.Minute)
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close() }() // only reads were made: nothing to lose
	if err := g.waitForRuntime(ctx, rt, wait); err != nil {
		return err
	}
	gen, err := pleg.New(rt, g.generatorOptions())
	if err != nil {
		return err
	}
	if sinceNow {
		// What the first relist finds is the state now, not a change:
		// relist before anyone subscribes, and only changes after it are
		// delivered. A change between this relist and the generator's
		// first is seen by the latter.
		if err := gen.Relist(ctx); err != nil {
			return err
		}
	}
	sub := gen.Subscribe()
	defer sub.Close()
	gen.Start()
	defer gen.Stop()
	match := filter.Matcher()
	for seq := uint64(1); ; {
		ev, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		e := api.NewEvent(seq, ev)
		seq++
		if match.Match(&e) {
			if err := p.print(e); err != nil {
				return err
			}
		}
	}
}

// follow prints the events of a daemon, from now on, until ctx ends.
func (g *global) follow(
	ctx context.Context,
	c *client.Client,
	filter api.Filter,
	wait time.Duration,
	p *eventPrinter,
) error {
	return c.Follow(ctx, client.FollowOptions{
		EventsRequest: client.EventsRequest{Filter: filter},
		Wait:          wait,
		Waiting: func(err error) {
			g.log.Warn("Waiting for the pleg daemon", "server", c.String(), "err", err, "giveUpAfter", waitWord(wait))
		},
		Connected: func() { g.log.Info("Following the pleg daemon", "server", c.String()) },
	}, p.print)
}

// waitWord says how long a wait lasts, for a log line.
func waitWord(wait time.Duration) string {
	if wait == 0 {
		return "never"
	}
	return wait.String()
}
