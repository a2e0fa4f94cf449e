// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// applyConfig sets, from the YAML file at path, every flag of cmd that
// the command line left unset. The file maps flag names to values; a map
// under a command's name holds values for that command alone, which beat
// the top level's:
//
//	runtime-endpoint: unix:///run/containerd/containerd.sock
//	relist-period: 1s
//	server: unix:///run/pleg.sock    # watch and doctor
//	run:
//	  listen: unix:///run/pleg.sock
//	demo:
//	  pods: 100
//
// One file serves every command: a top-level key that is a flag of some
// other command is left to it. A key that is a flag of no command, or not
// of the command whose section holds it, is an error, so that a typo does
// not pass silently.
func applyConfig(cmd *cobra.Command, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	return applyConfigData(cmd, path, data)
}

// applyConfigData applies the config file at path, read as data.
func applyConfigData(cmd *cobra.Command, path string, data []byte) error {
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	commands := map[string]*cobra.Command{}
	for _, c := range cmd.Root().Commands() {
		commands[c.Name()] = c
	}
	top := map[string]any{}
	var section map[string]any
	for _, key := range sortedKeys(values) {
		v := values[key]
		if sub, ok := v.(map[string]any); ok && commands[key] != nil {
			for _, k := range sortedKeys(sub) {
				if !hasFlag(commands[key], k) {
					return fmt.Errorf("--config %s: %s.%s: %q is not a flag of pleg %s", path, key, k, k, key)
				}
			}
			if key == cmd.Name() {
				section = sub
			}
			continue
		}
		if !slices.ContainsFunc(
			slices.Collect(maps.Values(commands)),
			func(c *cobra.Command) bool { return hasFlag(c, key) },
		) {
			return fmt.Errorf("--config %s: %q is not a flag of any pleg command", path, key)
		}
		top[key] = v
	}

	// The section first: what it sets counts as set for the top level,
	// and the command line's flags are set already.
	fs := cmd.Flags()
	set := func(values map[string]any, where string) error {
		for _, key := range sortedKeys(values) {
			f := fs.Lookup(key)
			if f == nil || f.Changed {
				continue // another command's, or already set
			}
			for _, v := range configValues(values[key]) {
				if err := fs.Set(key, v); err != nil {
					return fmt.Errorf("--config %s: %s%s: %w", path, where, key, err)
				}
			}
		}
		return nil
	}
	if err := set(section, cmd.Name()+"."); err != nil {
		return err
	}
	return set(top, "")
}

// hasFlag reports whether name is a flag of cmd, or one every command has,
// other than --config itself.
func hasFlag(cmd *cobra.Command, name string) bool {
	if name == "config" {
		return false
	}
	return cmd.Flags().Lookup(name) != nil || cmd.Root().PersistentFlags().Lookup(name) != nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// configValues turns a YAML value into flag values: one per list item.
func configValues(v any) []string {
	switch v := v.(type) {
	case []any:
		var out []string
		for _, item := range v {
			out = append(out, configValues(item)...)
		}
		return out
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}
	default:
		return []string{fmt.Sprint(v)}
	}
}
