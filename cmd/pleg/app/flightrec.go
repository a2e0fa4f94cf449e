// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/flightrec"
)

// registerFlightRecorder declares pleg run's flight recorder flags.
func registerFlightRecorder(f *pflag.FlagSet, fr *daemon.FlightRecorder) {
	f.BoolVar(&fr.Enabled, "flight-recorder", true,
		"keep the runtime's and the host's state at the onset of an incident in --state-dir's recordings/ "+
			"(read them with pleg doctor recordings); off without --state-dir")
	f.Float64Var(&fr.Fraction, "flight-recorder-fraction", flightrec.DefaultFraction,
		"record when a relist or a CRI call has been in flight for this fraction of the relist threshold")
	f.DurationVar(&fr.MinInterval, "flight-recorder-min-interval", flightrec.DefaultMinInterval,
		"least time between two recordings")
	f.IntVar(&fr.MaxCount, "flight-recorder-max-count", flightrec.DefaultMaxCount,
		"recordings kept at most; the oldest go first")
	f.Int64Var(&fr.MaxBytes, "flight-recorder-max-bytes", flightrec.DefaultMaxBytes,
		"bytes of recordings kept at most; the oldest go first")
	f.StringVar(&fr.DebugSocket, "flight-recorder-debug-socket", "",
		"containerd's debug socket ([debug] address in its config.toml, e.g. /run/containerd/debug.sock): "+
			"recordings then hold containerd's goroutine stacks")
	f.BoolVar(&fr.CRIOStacks, "flight-recorder-crio-stacks", false,
		"ask CRI-O for its goroutine stacks with SIGUSR1 when recording (it writes them to its /tmp); needs hostPID")
	f.BoolVar(&fr.KernelLog, "flight-recorder-kernel-log", false,
		"keep the kernel log's lines of hung tasks, OOM kills and I/O errors since shortly before the onset "+
			"(reads /dev/kmsg)")
}

func validateFlightRecorder(fr daemon.FlightRecorder) error {
	var errs []error
	if fr.Fraction <= 0 || fr.Fraction > 1 {
		errs = append(errs, fmt.Errorf("--flight-recorder-fraction %g: want more than 0, at most 1", fr.Fraction))
	}
	if fr.MinInterval <= 0 {
		errs = append(errs, fmt.Errorf("--flight-recorder-min-interval %v: must be more than 0", fr.MinInterval))
	}
	if fr.MaxCount < 1 {
		errs = append(errs, fmt.Errorf("--flight-recorder-max-count %d: must be at least 1", fr.MaxCount))
	}
	if fr.MaxBytes < 1<<20 {
		errs = append(errs, errors.New("--flight-recorder-max-bytes: must be at least 1048576 (1 MiB)"))
	}
	return errors.Join(errs...)
}
