// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"flag"
	"log/slog"
	"strconv"

	"k8s.io/klog/v2"
)

// logKlogTo sends klog's output, which client-go writes its own log lines
// to, through log, at the verbosity of -v, so that `--log-format json`
// gives one JSON stream; it returns what puts klog back. klog's logger is
// the process's: a command sets it while it runs.
func logKlogTo(log *slog.Logger, verbosity int) (restore func()) {
	klog.SetSlogLogger(log)
	// klog filters V(n) lines against its own -v before the logger sees
	// them: the same number as ours, as the kubelet's -v=4.
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	_ = fs.Set("v", strconv.Itoa(verbosity))
	return func() {
		_ = fs.Set("v", "0")
		klog.ClearLogger()
	}
}
