// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg/daemon"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/internal/safefile"
)

const recordingsLong = `Recordings lists the flight recordings pleg run took at the onset of
incidents (in --state-dir's recordings/, root-only), or reads one: its
findings (the runtime or a shim stopped or in uninterruptible sleep, the
runtime's goroutines piled on one lock, pressure, mounts that do not
answer, the kernel's complaints), the timeline of the incident and what
each part of the recording found. "latest" is the newest.

Exit status when reading one: 0, 1 or 2 as the findings make the verdict
(see pleg doctor).`

const recordingsExample = `  # The recordings of the node's pleg
  pleg doctor recordings

  # The newest, as text, then as a page with the timeline
  pleg doctor recordings latest
  pleg doctor recordings latest --html /tmp/recording.html

  # From a workstation, through the API server, even with the runtime hung
  kubectl pleg recordings node-17 latest -n kube-system -o json

  # A recording copied off the node
  pleg doctor recordings --file /tmp/20261126T212233.123Z-slow-call.json`

// recordingsFlags are pleg doctor recordings' settings.
type recordingsFlags struct {
	stateDir string
	file     string
	output   string
	htmlFile string
}

func (o *recordingsFlags) store() *flightrec.Store {
	return &flightrec.Store{Dir: filepath.Join(o.stateDir, flightrec.Dir)}
}

func newDoctorRecordingsCommand(g *global) *cobra.Command {
	var o recordingsFlags
	cmd := &cobra.Command{
		Use:     "recordings [NAME|latest]",
		Short:   "List the flight recordings of incidents, or read one with its findings",
		Long:    recordingsLong,
		Example: recordingsExample,
		Args:    cobra.MaximumNArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return oneOf("output", o.output, "text", "json") },
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(g, name)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.stateDir, "state-dir", daemon.DefaultStateDir, "pleg run's state directory")
	f.StringVar(&o.file, "file", "", "read the recording in this file instead")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.StringVar(&o.htmlFile, "html", "", `also write the recording as a self-contained HTML page with its timeline `+
		`to this file; "-" writes the page to the standard output and the text to the standard error`)
	return cmd
}

func (o *recordingsFlags) run(g *global, name string) error {
	if name == "" && o.file == "" {
		list, err := o.store().List()
		if err != nil {
			return fmt.Errorf("listing the recordings: %w", err)
		}
		if o.output == "json" {
			if list == nil {
				list = []flightrec.Entry{}
			}
			enc := json.NewEncoder(g.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Recordings []flightrec.Entry `json:"recordings"`
			}{list})
		}
		return render.RecordingList(g.stdout, list)
	}
	rec, err := o.read(name)
	if err != nil {
		return err
	}
	v := render.NewRecordingView(rec)
	out := g.stdout
	switch o.htmlFile {
	case "":
	case "-":
		if err := render.RecordingHTML(g.stdout, v); err != nil {
			return fmt.Errorf("--html -: %w", err)
		}
		out = g.stderr
	default:
		page := func(w io.Writer) error { return render.RecordingHTML(w, v) }
		if err := safefile.Write(o.htmlFile, 0o644, page); err != nil {
			return fmt.Errorf("--html: %w", err)
		}
	}
	if o.output == "json" {
		err = render.RecordingJSON(out, v)
	} else {
		err = render.RecordingText(out, v)
	}
	if err != nil {
		return err
	}
	if code := v.Verdict.ExitCode(); code != 0 {
		return exitStatus(code)
	}
	return nil
}

// read reads the recording of --file, or name ("latest": the newest).
func (o *recordingsFlags) read(name string) (*flightrec.Recording, error) {
	if o.file != "" {
		return flightrec.ReadFile(o.file)
	}
	s := o.store()
	if name == "latest" {
		list, err := s.List()
		if err != nil {
			return nil, fmt.Errorf("listing the recordings: %w", err)
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("no recordings in %s", s.Dir)
		}
		name = list[len(list)-1].Name
	}
	rec, err := s.Read(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no recording %q in %s: pleg doctor recordings lists them", name, s.Dir)
	}
	return rec, err
}

// addLatestRecording adds to a diagnosis the findings of the newest
// recording in stateDir, if any; a directory that is absent holds none,
// one that cannot be read is told on errOut.
func addLatestRecording(r *doctor.Report, stateDir string, errOut io.Writer) {
	if stateDir == "" {
		return
	}
	s := &flightrec.Store{Dir: filepath.Join(stateDir, flightrec.Dir)}
	list, err := s.List()
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			_, _ = fmt.Fprintf(errOut, "pleg doctor: the flight recordings were not read: %v\n", err)
		}
		return
	}
	if len(list) == 0 {
		return
	}
	rec, err := s.Read(list[len(list)-1].Name)
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "pleg doctor: the newest flight recording was not read: %v\n", err)
		return
	}
	doctor.AddRecording(r, rec, time.Now())
}
