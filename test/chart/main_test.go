// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/plegkit/pleg/test/chart/dashboard"
)

// TestMain, with -update, first writes the files the chart copies (its
// rules, its dashboard), so that the renders written after them hold
// them.
func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		if err := writeChartCopies(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// chartCopies are the dashboard's JSON, which package dashboard builds,
// where the chart (which cannot read outside its directory) and deploy/
// hold it: each copy's path and what it must hold.
func chartCopies() (map[string][]byte, error) {
	dash, err := dashboard.JSON()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		filepath.Join(deployDir, "grafana", "pleg-dashboard.json"): dash,
		filepath.Join(chartDir, "dashboards", "pleg.json"):         dash,
	}, nil
}

func writeChartCopies() error {
	copies, err := chartCopies()
	if err != nil {
		return err
	}
	for path, data := range copies {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
