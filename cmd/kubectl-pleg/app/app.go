// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app holds the commands of kubectl-pleg, the kubectl plugin
// (krew's conventions: a binary named kubectl-pleg on PATH, kubectl's
// own flags for the cluster and the namespace) that reads a node's pleg
// through the API server.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/internal/safefile"
)

// ExitCode is an error that only sets the exit status: 0, 1 or 2 as a
// diagnosis' verdict makes it, as pleg doctor's.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// DefaultNamespace is where the README installs the chart.
const DefaultNamespace = "kube-system"

// maxAnswer bounds what is read of a report or a recording; a bundle is
// streamed to its file.
const maxAnswer = 128 << 20

const long = `kubectl pleg reads the pleg daemon of a node through the API server, the
way that works when the node's container runtime is hung: the API
server's pod proxy connects to the pleg pod's diagnosis port itself,
where kubectl exec, logs, port-forward and debug all go through the
runtime and hang with it.

It needs the chart's diagnosis.enabled=true and, in pleg's namespace
(-n, default kube-system), get and list on pods and get on pods/proxy:
the chart's Role RELEASE-diagnosis, bound to diagnosis.subjects. It
needs no nodes/proxy, which would also let its holder run commands in
any container of the node.`

// plugin holds the flags every command shares.
type plugin struct {
	flags    *clientcmd.ConfigOverrides
	loading  *clientcmd.ClientConfigLoadingRules
	selector string
	scheme   string
	timeout  time.Duration
	stdout   io.Writer
	stderr   io.Writer
	// proxy, if set, replaces the API server's pod proxy (tests).
	proxy Proxy
}

// NewCommand returns the kubectl-pleg command.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	return newCommand(stdout, stderr, nil)
}

func newCommand(stdout, stderr io.Writer, proxy Proxy) *cobra.Command {
	p := &plugin{
		flags: &clientcmd.ConfigOverrides{}, loading: clientcmd.NewDefaultClientConfigLoadingRules(),
		stdout: stdout, stderr: stderr, proxy: proxy,
	}
	root := &cobra.Command{
		Use: "pleg",
		// krew's convention: the help names the command as typed.
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl pleg"},
		Short:         "Read a node's pleg through the API server: its diagnosis, flight recordings, a bundle",
		Long:          long,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	f := root.PersistentFlags()
	f.StringVar(&p.loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(p.flags, f, clientcmd.RecommendedConfigOverrideFlags(""))
	f.StringVarP(&p.selector, "selector", "l", "app.kubernetes.io/name=pleg", "labels of pleg's pods")
	f.StringVar(&p.scheme, "scheme", "", `"https" when the diagnosis listener serves TLS (--web-config-file)`)
	f.DurationVar(&p.timeout, "timeout", 2*time.Minute, "time the whole command may take")
	root.AddCommand(p.doctorCommand(), p.recordingsCommand(), p.bundleCommand())
	return root
}

// client is the proxy to the node's pleg, from kubectl's flags.
func (p *plugin) client() (Proxy, error) {
	if p.proxy != nil {
		return p.proxy, nil
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(p.loading, p.flags)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubectl-pleg"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns := p.flags.Context.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return &podProxy{cs: cs, namespace: ns, selector: p.selector, scheme: p.scheme}, nil
}

// get GETs path of node's pleg, whole (at most maxAnswer bytes).
func (p *plugin) get(ctx context.Context, node, path string, params map[string]string) ([]byte, error) {
	px, err := p.client()
	if err != nil {
		return nil, err
	}
	pod, port, err := px.Find(ctx, node)
	if err != nil {
		return nil, err
	}
	rc, err := px.Get(ctx, pod, port, path, params)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, maxAnswer))
}

func (p *plugin) context(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), p.timeout)
}

const doctorExample = `  # The diagnosis of node-17, made by its pleg now, through the API server
  kubectl pleg doctor node-17 -n kube-system

  # As JSON, and a page to attach to the incident
  kubectl pleg doctor node-17 -n kube-system -o json --html pleg-doctor.html`

func (p *plugin) doctorCommand() *cobra.Command {
	var output, html string
	cmd := &cobra.Command{
		Use:     "doctor NODE",
		Short:   "The node's diagnosis, made by its pleg now (pleg doctor, with the daemon's figures)",
		Example: doctorExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			ctx, cancel := p.context(cmd)
			defer cancel()
			body, err := p.get(ctx, args[0], "/v1/doctor", nil)
			if err != nil {
				return err
			}
			var r doctor.Report
			if err := json.Unmarshal(body, &r); err != nil {
				return fmt.Errorf("pleg's answer is not a report: %w: %.200q", err, body)
			}
			if html != "" {
				if err := writeOut(html, p.stdout, func(w io.Writer) error { return render.HTML(w, &r) }); err != nil {
					return err
				}
			}
			out := p.stdout
			if html == "-" {
				out = p.stderr
			}
			if output == "json" {
				err = render.JSON(out, &r)
			} else {
				err = render.Text(out, &r)
			}
			if err != nil {
				return err
			}
			if code := r.Verdict.ExitCode(); code != 0 {
				return ExitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().StringVar(&html, "html", "", `also write the report as a page to this file ("-": the standard output)`)
	return cmd
}

const recordingsExample = `  # The flight recordings of node-17, and the newest read with its findings
  kubectl pleg recordings node-17 -n kube-system
  kubectl pleg recordings node-17 latest -n kube-system`

func (p *plugin) recordingsCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "recordings NODE [NAME|latest]",
		Short:   "List the node's flight recordings, or read one with its findings",
		Example: recordingsExample,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			ctx, cancel := p.context(cmd)
			defer cancel()
			body, err := p.get(ctx, args[0], "/v1/recordings", nil)
			if err != nil {
				return err
			}
			var list api.RecordingList
			if err := json.Unmarshal(body, &list); err != nil {
				return fmt.Errorf("pleg's answer is not a list of recordings: %w: %.200q", err, body)
			}
			if len(args) == 1 {
				if output == "json" {
					_, err := p.stdout.Write(body)
					return err
				}
				return render.RecordingList(p.stdout, list.Recordings)
			}
			name := args[1]
			if name == "latest" {
				if len(list.Recordings) == 0 {
					return fmt.Errorf("no recordings on node %s", args[0])
				}
				name = list.Recordings[len(list.Recordings)-1].Name
			}
			if !flightrec.ValidName(name) {
				return fmt.Errorf("%q is not a recording's name (kubectl pleg recordings %s lists them)", name, args[0])
			}
			body, err = p.get(ctx, args[0], "/v1/recordings/"+name, nil)
			if err != nil {
				return err
			}
			var rec flightrec.Recording
			if err := json.Unmarshal(body, &rec); err != nil {
				return fmt.Errorf("pleg's answer is not a recording: %w: %.200q", err, body)
			}
			v := render.NewRecordingView(&rec)
			if output == "json" {
				err = render.RecordingJSON(p.stdout, v)
			} else {
				err = render.RecordingText(p.stdout, v)
			}
			if err != nil {
				return err
			}
			if code := v.Verdict.ExitCode(); code != 0 {
				return ExitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

const bundleExample = `  # The support bundle of node-17 (the pod's view: no host logs unless mounted)
  kubectl pleg bundle node-17 -n kube-system -f pleg-bundle-node-17.tar.gz`

func (p *plugin) bundleCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:     "bundle NODE",
		Short:   "Write the node's support bundle (pleg doctor bundle, made by its pleg) to a file",
		Example: bundleExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := p.context(cmd)
			defer cancel()
			px, err := p.client()
			if err != nil {
				return err
			}
			pod, port, err := px.Find(ctx, args[0])
			if err != nil {
				return err
			}
			rc, err := px.Get(ctx, pod, port, "/v1/bundle", nil)
			if err != nil {
				return err
			}
			defer rc.Close()
			if file == "" {
				file = fmt.Sprintf("pleg-bundle-%s-%s.tar.gz", args[0], time.Now().UTC().Format("20060102T150405Z"))
			}
			var n int64
			err = writeOut(file, p.stdout, func(w io.Writer) error {
				n, err = io.Copy(w, rc)
				return err
			})
			if err != nil {
				return fmt.Errorf("the bundle of %s: %w", args[0], err)
			}
			if file != "-" {
				_, _ = fmt.Fprintf(p.stderr, "kubectl pleg bundle: %s, %d bytes from %s\n", file, n, pod)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", `the archive's file ("-": the standard output); default `+
		`pleg-bundle-NODE-TIME.tar.gz`)
	return cmd
}

// writeOut writes through write to path, 0600 and renamed into place,
// never through a symbolic link; "-" is stdout.
func writeOut(path string, stdout io.Writer, write func(w io.Writer) error) error {
	if path == "-" {
		return write(stdout)
	}
	return safefile.Write(path, 0o600, write)
}
