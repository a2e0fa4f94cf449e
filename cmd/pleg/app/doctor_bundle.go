// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/bundle"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/internal/safefile"
)

const bundleLong = `Bundle writes one archive (tar.gz) to attach to a bug report of the
runtime (containerd, CRI-O) or of pleg: doctor's report as JSON and HTML,
the flight recordings of the incident (taken within --since), the
runtime's and the kubelet's recent log lines (journalctl where it is,
else /var/log/<unit>.log), a kernel log excerpt, the runtime's version,
status and configuration, and its sandbox and container lists, each call
under a deadline, so that a hung runtime still gives a bundle. A
manifest.json and a README.txt in it say what each file is and what
could not be taken.

Secrets are kept out by what is read: the lists keep an allow-list of
fields (no annotations, no labels but the kubelet's, no container
status, which holds the environment); the configuration keeps string
values for an allow-list of keys only (registry credentials and headers
are never kept); logs, free text, pass a list of credential shapes. Read
the logs before sharing a bundle publicly. The archive is written 0600.`

const bundleExample = `  # On the node, as root: the bundle of the node's containerd, with the daemon's figures
  pleg doctor bundle --server unix:///run/pleg/pleg.sock -f /tmp/pleg-bundle.tar.gz

  # CRI-O
  pleg doctor bundle -r unix:///var/run/crio/crio.sock -f /tmp/pleg-bundle.tar.gz

  # From a workstation, through the API server, when the runtime is hung (kubectl-pleg)
  kubectl pleg bundle node-17 -n kube-system -f pleg-bundle-node-17.tar.gz`

// bundleFlags are pleg doctor bundle's settings.
type bundleFlags struct {
	file     string
	since    time.Duration
	maxBytes int
	budget   time.Duration
	stateDir string
	hostRoot string
	server   serverFlags
}

func newDoctorBundleCommand(g *global) *cobra.Command {
	var o bundleFlags
	cmd := &cobra.Command{
		Use:     "bundle",
		Short:   "Write one archive of the node's diagnosis, recordings, logs and runtime, for a bug report",
		Long:    bundleLong,
		Example: bundleExample,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", `where to write the archive; "-" writes it to the standard output; `+
		`default pleg-bundle-NODE-TIME.tar.gz in the current directory`)
	f.DurationVar(&o.since, "since", bundle.DefaultSince, "how far back logs and recordings go")
	o.maxBytes = bundle.DefaultMaxBytes
	f.Var(byteSize{&o.maxBytes}, "max-size", "bound of the archive's content before compression (16Mi, 64Mi...)")
	f.DurationVar(&o.budget, "budget", 30*time.Second, "time doctor's diagnosis in the bundle may take")
	f.StringVar(&o.stateDir, "state-dir", daemon.DefaultStateDir, `pleg run's state directory, for its flight `+
		`recordings; "" reads none`)
	f.StringVar(&o.hostRoot, "host-root", "/", "the host's root, where /etc and /var/log are read (e.g. /host in a "+
		"debug pod); journalctl and the kernel log are read only with /")
	o.server.register(f, "also read the health and relist figures of the pleg daemon at this address")
	return cmd
}

func (o *bundleFlags) run(cmd *cobra.Command, g *global) error {
	daemonClient, err := o.server.client()
	if err != nil {
		return err
	}
	cfg := bundle.Config{Since: o.since, MaxBytes: int64(o.maxBytes), Root: o.hostRoot}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if node, err := (&kubeFlags{}).node(); err == nil {
		cfg.Node = node
	}
	if o.stateDir != "" {
		s := &flightrec.Store{Dir: filepath.Join(o.stateDir, flightrec.Dir)}
		if _, err := os.Stat(s.Dir); err == nil {
			cfg.Recordings = s
		}
	}
	rt, err := g.runtime(doctor.DefaultCallTimeout)
	if err != nil {
		cfg.ReportError = err.Error()
	} else {
		defer rt.Close()
		cfg.CRI, cfg.Endpoint = rt.Client(), g.endpoint
		opts := doctor.Options{Endpoint: g.endpoint, Budget: o.budget, CallTimeout: g.timeout,
			RelistPeriod: g.relistPeriod, RelistThreshold: g.relistThreshold, PlegConcurrency: g.inspectConcurrency,
			Daemon: daemonClient}
		report, err := doctor.Diagnose(cmd.Context(), rt.Client(), opts)
		if err != nil {
			return err
		}
		addLatestRecording(report, o.stateDir, g.stderr)
		cfg.Report = report
	}
	path := o.file
	if path == "" {
		path = fmt.Sprintf("pleg-bundle-%s-%s.tar.gz", cfg.Node, time.Now().UTC().Format("20060102T150405Z"))
	}
	var man *bundle.Manifest
	write := func(w io.Writer) error {
		var err error
		man, err = bundle.Write(cmd.Context(), w, cfg)
		return err
	}
	if path == "-" {
		err = write(g.stdout)
	} else {
		err = safefile.Write(path, 0o600, write) // a bundle names pods and holds logs
	}
	if err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	return o.tell(g, path, man)
}

// tell says on the standard error what the bundle holds.
func (o *bundleFlags) tell(g *global, path string, man *bundle.Manifest) error {
	size := ""
	if fi, err := os.Stat(path); err == nil {
		size = fmt.Sprintf(", %d bytes", fi.Size())
	}
	var names []string
	for _, f := range man.Files {
		names = append(names, f.Name)
	}
	_, _ = fmt.Fprintf(g.stderr, "pleg doctor bundle: %s%s: %s\n", path, size, strings.Join(names, ", "))
	for _, m := range man.Missing {
		_, _ = fmt.Fprintf(g.stderr, "  not taken: %s: %s\n", m.Part, m.Why)
	}
	return nil
}
