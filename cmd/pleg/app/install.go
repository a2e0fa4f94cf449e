// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg/internal/version"
)

// newInstallCommand is pleg install: this binary copied to a path, which
// the chart's hostBinary runs in an init container so that `pleg doctor`
// is on the host, for an operator who reaches the node over SSH while the
// API server cannot reach it (or its runtime is hung, which keeps
// kubectl exec from the pod's copy).
func newInstallCommand(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "install PATH",
		Short: "Copy this pleg binary to PATH (the chart's hostBinary puts it on the host)",
		Long: `Install copies the running pleg binary to PATH, mode 0755, written beside it
and renamed into place, so that a pleg running from PATH is never
overwritten under it and a copy cut short never replaces a good one.`,
		Example: "  # What the chart's hostBinary init container runs, the host's /opt/pleg/bin mounted at /host-bin\n" +
			"  pleg install /host-bin/pleg",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := install(args[0]); err != nil {
				return fmt.Errorf("pleg install: %w", err)
			}
			g.printf("pleg %s installed at %s\n", version.Get().Version, args[0])
			return nil
		},
	}
}

// install copies this executable to path.
func install(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s is not an absolute path", path)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }() // read only
	dst, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Chmod(0o755)
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(dst.Name(), path)
	}
	if err != nil {
		err = errors.Join(err, os.Remove(dst.Name()))
	}
	return err
}
