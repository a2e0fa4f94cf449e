// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg/api/client"
	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/internal/safefile"
)

// exitStatus is an error that only sets the exit status: the command has
// already said what it had to.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// doctorFailed is the exit status of a diagnosis that could not run: as
// bad as an unhealthy verdict, since nothing says the node is fine.
const doctorFailed = 2

// doctorLong is pleg doctor's help.
const doctorLong = `Doctor diagnoses a node whose kubelet reports "PLEG is not healthy", or
might: it asks the CRI runtime what the kubelet's relist asks, times every
call, counts pods and containers, projects the relist against the kubelet's
period and threshold (--relist-period 1s, --relist-threshold 3m; pleg's own
projection inspects --inspect-concurrency pods at once), and prints a
verdict with ranked findings, each with its evidence and an action. It only
reads: Version, Status, the list and status calls and the event stream; it
changes nothing.

Below the CRI it reads the node as pleg run's flight recorder does
(--node-probe): the runtime's processes, its shims and the runc and CNI
plugin processes they run with their ages, processes stuck in D or T, the
kubelet and its wait for a CPU, PIDs against pid_max and the pids cgroups,
pressure, memory, mounts that do not answer and the kernel log; and the
kubelet's own PLEG from its metrics (--kubelet). The first finding names
the cause: a runtime or shim stopped, a mount that hangs, PIDs used up, a
CNI plugin that does not end, the disk, the CPU or memory, a starved
kubelet, before the symptoms seen through the CRI. Every read is bounded
in time and size, and nothing is signalled.

It keeps to --budget: pods it has no time for are left out and the
projections extrapolated from those it inspected; a call without an answer
within --timeout (default 10s, at most a quarter of the budget) is reported
hung. Pods are inspected one at a time as the kubelet does, so that each
call is timed alone; --concurrency goes faster on a big node.

Exit status:
  0  healthy: nothing found that would make the PLEG unhealthy
  1  at risk: healthy now, but something found would make it unhealthy
     under load or after a restart, or delays its events
  2  unhealthy, the runtime does not answer, or the diagnosis could not run`

// doctorExample is pleg doctor's examples.
const doctorExample = `  # Diagnose the node's containerd
  pleg doctor

  # CRI-O, a report to share, and a running pleg daemon's own figures
  pleg doctor -r unix:///var/run/crio/crio.sock --html /tmp/pleg-doctor.html --server http://127.0.0.1:9847

  # From a workstation, through the API server, even with the runtime hung
  # (kubectl-pleg, the chart's diagnosis.enabled): the daemon's own diagnosis
  kubectl pleg doctor node-17 -n kube-system --html pleg-doctor.html

  # In the node's pleg pod while its runtime answers (/pleg: not on a PATH; the
  # chart sets CONTAINER_RUNTIME_ENDPOINT, so no -r): the page comes out on stdout
  kubectl exec -n kube-system \
    $(kubectl get pod -n kube-system -l app.kubernetes.io/name=pleg --field-selector spec.nodeName=node-17 -o name) \
    -- /pleg doctor --html - > pleg-doctor.html

  # A large node: 200 pods spread over the node, 4 at a time, within 2 minutes
  pleg doctor --sample 200 --concurrency 4 --budget 2m -o json`

// doctorFlags are pleg doctor's settings, as its flags set them.
type doctorFlags struct {
	budget      time.Duration
	sample      int
	concurrency int
	server      serverFlags
	daemon      *client.Client
	output      string
	htmlFile    string
	stateDir    string
	node        nodeFlags
}

func newDoctorCommand(g *global) *cobra.Command {
	var o doctorFlags
	cmd := &cobra.Command{
		Use:     "doctor",
		Short:   `Diagnose why a node's PLEG is, or may become, "not healthy"`,
		Long:    doctorLong,
		Example: doctorExample,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			o.daemon, err = o.server.client()
			return errors.Join(err, oneOf("output", o.output, "text", "json"),
				notZero(cmd.Flags(), "budget", "concurrency"), o.options(g).Validate(), o.node.validate())
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	f := cmd.Flags()
	f.DurationVar(&o.budget, "budget", doctor.DefaultBudget, "time the whole diagnosis may take")
	f.IntVar(&o.sample, "sample", 0, "inspect this many pods, spread over the node (0: every pod)")
	f.IntVar(&o.concurrency, "concurrency", doctor.DefaultConcurrency,
		"pods inspected at once (1: as the kubelet, each call timed alone)")
	o.server.register(f, "also read the health and relist figures of the pleg daemon at this address")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.StringVar(&o.htmlFile, "html", "", `also write the report as a self-contained HTML page to this file; "-" writes `+
		`the page to the standard output and the report to the standard error (in a pod, whose root filesystem is `+
		`read-only: kubectl exec ... -- /pleg doctor --html - > page.html)`)
	f.StringVar(&o.stateDir, "state-dir", daemon.DefaultStateDir, "pleg run's state directory: the findings of its "+
		"newest flight recording join the verdict (one older than an hour as info); \"\" reads none")
	o.node.register(f)
	cmd.AddCommand(newDoctorRecordingsCommand(g), newDoctorBundleCommand(g))
	return cmd
}

// options are the diagnosis' options, from the flags and the global ones.
func (o *doctorFlags) options(g *global) doctor.Options {
	return doctor.Options{
		Endpoint:        g.endpoint,
		Budget:          o.budget,
		CallTimeout:     g.timeout,
		Sample:          o.sample,
		Concurrency:     o.concurrency,
		RelistPeriod:    g.relistPeriod,
		RelistThreshold: g.relistThreshold,
		PlegConcurrency: g.inspectConcurrency,
		Daemon:          o.daemon,
	}
}

// run diagnoses the node, writes the report, and exits with the verdict's
// status.
func (o *doctorFlags) run(cmd *cobra.Command, g *global) error {
	rt, err := g.doctorRuntime(doctor.DefaultCallTimeout)
	if err != nil {
		return err
	}
	defer rt.Close()
	opts := o.options(g)
	opts.Endpoint = rt.Endpoint()
	if p := o.node.prober(rt.Endpoint(), o.budget); p != nil {
		opts.Node = p
	}
	report, err := doctor.Diagnose(cmd.Context(), rt.Client(), opts)
	if err != nil {
		return err
	}
	addLatestRecording(report, o.stateDir, g.stderr)
	// With --html - the page is the standard output, whole, and the
	// report goes to the standard error: in a pod, whose root filesystem
	// is read-only, `kubectl exec ... pleg doctor --html - > page.html`
	// brings the page out and still shows the report.
	out := g.stdout
	switch o.htmlFile {
	case "":
	case "-":
		if err := render.HTML(g.stdout, report); err != nil {
			return fmt.Errorf("--html -: %w", err)
		}
		out = g.stderr
	default:
		if err := safefile.Write(o.htmlFile, 0o644, func(w io.Writer) error { return render.HTML(w, report) }); err != nil {
			return fmt.Errorf("--html: %w", err)
		}
	}
	if o.output == "json" {
		err = render.JSON(out, report)
	} else {
		err = render.Text(out, report)
	}
	if err != nil {
		return err
	}
	if code := report.Verdict.ExitCode(); code != 0 {
		return exitStatus(code)
	}
	return nil
}
