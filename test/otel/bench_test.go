// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otel

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkExportOnOff runs two pleg daemons side by side, each over its
// own pleg sim of the same seed and churn, one exporting to a real
// collector and one not, and reports each one's CPU (ms per second) and
// resident set, the records and bytes exported per second, and the
// collector's CPU per 1,000 records/s. Both keep a journal in a state
// directory, so that the difference is the export's alone.
//
// The simulator's default churn (20 pods x 3 containers, the figures of a
// node per docs/fleet.md):
//
//	cd test/otel && go test -run '^$' -bench ExportOnOff -benchtime 1x
//
// A heavy churn, for the collector's CPU per 1,000 records/s:
//
//	PLEG_OTEL_BENCH_SIM='--pods 200 --containers 3 --churn crash=200,short=200,exit=50' \
//	  go test -run '^$' -bench ExportOnOff -benchtime 1x
//
// PLEG_OTEL_BENCH_SECONDS sets the measured time (default 60).
func BenchmarkExportOnOff(b *testing.B) {
	seconds := 60
	if v := os.Getenv("PLEG_OTEL_BENCH_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("PLEG_OTEL_BENCH_SECONDS=%q", v)
		}
		seconds = n
	}
	simArgs := []string{"--latency", "seed-node", "--seed", "11"}
	if v := os.Getenv("PLEG_OTEL_BENCH_SIM"); v != "" {
		simArgs = append(simArgs, strings.Fields(v)...)
	}
	c := newCollector(b)
	c.start()
	off := startPlegOver(b, simArgs)
	on := startPlegOver(b, simArgs, "--otlp-endpoint", c.grpcEndpoint(), "--otlp-insecure")
	for range b.N {
		time.Sleep(10 * time.Second) // past the first relist and the first exports
		procs := []int{off.p.cmd.Process.Pid, on.p.cmd.Process.Pid, c.p.cmd.Process.Pid}
		cpu0 := make([]float64, len(procs))
		for i, pid := range procs {
			cpu0[i] = cpuSeconds(b, pid)
		}
		rec0, bytes0 := on.metric("pleg_export_records_total"), on.metric("pleg_export_bytes_total")
		start := time.Now()
		time.Sleep(time.Duration(seconds) * time.Second)
		wall := time.Since(start).Seconds()
		cpu := make([]float64, len(procs))
		for i, pid := range procs {
			cpu[i] = (cpuSeconds(b, pid) - cpu0[i]) / wall * 1000
		}
		recs := (on.metric("pleg_export_records_total") - rec0) / wall
		bytes := (on.metric("pleg_export_bytes_total") - bytes0) / wall
		b.ReportMetric(cpu[0], "off-cpu-ms/s")
		b.ReportMetric(cpu[1], "on-cpu-ms/s")
		b.ReportMetric(cpu[1]-cpu[0], "added-cpu-ms/s")
		b.ReportMetric(rssMiB(b, procs[0]), "off-rss-MiB")
		b.ReportMetric(rssMiB(b, procs[1]), "on-rss-MiB")
		b.ReportMetric(recs, "records/s")
		b.ReportMetric(bytes, "bytes/s")
		b.ReportMetric(cpu[2], "collector-cpu-ms/s")
		if recs > 0 {
			b.ReportMetric(cpu[2]/recs*1000, "collector-cpu-ms/s-per-1k-rec/s")
		}
		b.Logf("pleg off %.1f ms/s %.1f MiB, on %.1f ms/s %.1f MiB; %.1f records/s, %.0f bytes/s; collector %.1f ms/s",
			cpu[0], rssMiB(b, procs[0]), cpu[1], rssMiB(b, procs[1]), recs, bytes, cpu[2])
	}
}

// cpuSeconds is a process's user and system time, from /proc.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// rssMiB is a process's resident set, from /proc.
func rssMiB(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
