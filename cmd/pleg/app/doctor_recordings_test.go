// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/flightrec"
)

// writeRecordings writes two recordings into a state directory: an older
// one of a healthy node's slow call, and the newest, of a stopped shim.
func writeRecordings(t *testing.T) (stateDir string, names []string) {
	t.Helper()
	stateDir = t.TempDir()
	s := flightrec.Store{Dir: filepath.Join(stateDir, flightrec.Dir)}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Millisecond)
	for i, rec := range []*flightrec.Recording{
		{Trigger: flightrec.TriggerSlowCall, Onset: t0},
		{Trigger: flightrec.TriggerStuckProcess, Onset: t0.Add(time.Minute),
			Processes: &flightrec.Processes{List: []flightrec.Process{{Pid: 42, Role: "shim", Comm: "containerd-shim", State: "T"}}}},
	} {
		rec.Version = flightrec.FormatVersion
		rec.Name = rec.Onset.Format("20060102T150405.000Z") + "-" + rec.Trigger
		rec.Started, rec.Finished = rec.Onset, rec.Onset.Add(time.Duration(i+1)*time.Millisecond)
		if _, err := s.Write(rec); err != nil {
			t.Fatal(err)
		}
		names = append(names, rec.Name)
	}
	return stateDir, names
}

func TestDoctorRecordings(t *testing.T) {
	stateDir, names := writeRecordings(t)
	code, out, errOut := execArgs(t, "doctor", "recordings", "--state-dir", stateDir)
	if code != 0 || !strings.Contains(out, names[0]) || !strings.Contains(out, names[1]) || errOut != "" {
		t.Errorf("the list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = execArgs(t, "doctor", "recordings", "latest", "--state-dir", stateDir, "-o", "json")
	var v render.RecordingView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if code != 2 || v.Recording.Name != names[1] || v.Verdict != doctor.Unhealthy ||
		v.Findings[0].ID != "shim-stopped" {
		t.Errorf("latest: exit %d, %s, %s, findings %+v", code, v.Recording.Name, v.Verdict, v.Findings)
	}
	code, out, _ = execArgs(t, "doctor", "recordings", names[0], "--state-dir", stateDir)
	if code != 0 || !strings.HasPrefix(out, "Recording "+names[0]+": HEALTHY\n") {
		t.Errorf("%s: exit %d\n%s", names[0], code, out)
	}
	page := filepath.Join(t.TempDir(), "rec.html")
	code, _, _ = execArgs(t, "doctor", "recordings", "--file", filepath.Join(stateDir, flightrec.Dir, names[1]+".json"),
		"--html", page)
	if b, err := os.ReadFile(page); code != 2 || err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("--file --html: exit %d, %v", code, err)
	}
	for _, bad := range []string{"../../etc/passwd", "20990101T000000.000Z-unhealthy"} {
		if code, _, errOut := execArgs(t, "doctor", "recordings", bad, "--state-dir", stateDir); code == 0 || errOut == "" {
			t.Errorf("recording %q: exit %d, %q; want an error", bad, code, errOut)
		}
	}
	if code, out, _ := execArgs(t, "doctor", "recordings", "--state-dir", t.TempDir()); code != 0 || out != "no recordings\n" {
		t.Errorf("no recordings: exit %d %q", code, out)
	}
}

// The newest recording's findings join a diagnosis' verdict.
func TestDoctorAddsTheNewestRecording(t *testing.T) {
	stateDir, names := writeRecordings(t)
	r := &doctor.Report{Verdict: doctor.Healthy}
	var errOut bytes.Buffer
	addLatestRecording(r, stateDir, &errOut)
	if r.Recording != names[1] || r.Verdict != doctor.Unhealthy || errOut.Len() != 0 {
		t.Errorf("report %+v, %s", r, errOut.String())
	}
	r = &doctor.Report{Verdict: doctor.Healthy}
	addLatestRecording(r, filepath.Join(t.TempDir(), "none"), &errOut)
	if r.Recording != "" || r.Verdict != doctor.Healthy || errOut.Len() != 0 {
		t.Errorf("without recordings: %+v, %s", r, errOut.String())
	}
}
