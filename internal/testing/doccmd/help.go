// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package doccmd

import (
	"io"

	"github.com/spf13/cobra"

	kubectlpleg "github.com/plegkit/pleg/cmd/kubectl-pleg/app"
	"github.com/plegkit/pleg/cmd/pleg/app"
)

// HelpPrefix starts the File of a command shown in the CLI's help: "help:
// pleg doctor" is the Example of pleg doctor.
const HelpPrefix = "help: "

// Help returns the commands the CLI's help text shows a reader: every
// line of every Example of pleg's and kubectl-pleg's commands but
// comments and blank ones, as a sh block's. A command's examples are one
// block, in the pseudo-file "help: " and its command path.
func Help() ([]Command, error) {
	var out []Command
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if c.Example != "" {
			cmds, err := Parse(HelpPrefix+c.CommandPath(), "```sh\n"+c.Example+"\n```\n")
			if err != nil {
				return err
			}
			out = append(out, cmds...)
		}
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	for _, root := range []*cobra.Command{
		app.NewCommand(io.Discard, io.Discard), kubectlpleg.NewCommand(io.Discard, io.Discard),
	} {
		if err := walk(root); err != nil {
			return nil, err
		}
	}
	return out, nil
}
