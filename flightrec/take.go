// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package flightrec

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/plegkit/pleg"
)

// Part names.
const (
	PartPleg          = "pleg"
	PartVersion       = "runtime-version"
	PartProcesses     = "processes"
	PartRuntimeStacks = "runtime-stacks"
	PartHost          = "host"
	PartMounts        = "mounts"
	PartKernelLog     = "kernel-log"
)

// partResult is what a probe returns beside its value.
type partResult struct {
	skipped   string
	truncated bool
	err       error
}

// runPart runs f in a goroutine of its own, with a context that ends at
// timeout, and waits for it no longer than that: a probe that ignores its
// context, blocked in a read of a socket or in the kernel, is abandoned
// and the part marked timed out. It never blocks past the deadline.
func runPart[T any](ctx context.Context, name string, timeout time.Duration, now func() time.Time,
	f func(ctx context.Context) (T, partResult),
) (T, Part) {
	p := Part{Name: name, Started: now()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type out struct {
		v T
		r partResult
	}
	ch := make(chan out, 1)
	go func() {
		v, r := f(ctx)
		ch <- out{v, r}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	var zero T
	select {
	case o := <-ch:
		p.Finished = now()
		p.Skipped, p.Truncated = o.r.skipped, o.r.truncated
		if o.r.err != nil {
			p.Error = o.r.err.Error()
			if errors.Is(o.r.err, context.DeadlineExceeded) {
				p.TimedOut = true
			}
		}
		return o.v, p
	case <-t.C:
		p.Finished, p.TimedOut = now(), true
		return zero, p
	}
}

// Take takes a recording now, on trigger for reason, and writes it. The
// timeline holds the incident's triggers so far. It returns the
// recording, written or not (err then says why).
func (r *Recorder) Take(ctx context.Context, trigger, reason string, timeline []TimelineEntry) (*Recording, error) {
	r.recording.Lock()
	defer r.recording.Unlock()
	onset := r.cfg.Now()
	if len(timeline) > 0 {
		onset = timeline[0].At
	}
	rec := &Recording{
		Version: FormatVersion, Name: recordingName(onset, trigger), Trigger: trigger, Reason: reason,
		Onset: onset, Started: r.cfg.Now(), Timeline: timeline,
	}
	r.assemble(rec, r.probe(ctx, onset))
	rec.Finished = r.cfg.Now()
	return rec, r.write(rec)
}

// probed is what the parts found, each with how it went.
type probed struct {
	view              *PlegView
	version, stacks   *RuntimeState
	node              *nodeProbed
	pPleg, pVer, pStk Part
}

// mounts is what the mounts part found.
type mounts struct {
	hung    []string
	checked int
}

// probe runs every part at once, each in a goroutine of its own under
// its deadline: pleg's own, the runtime's version and stacks, and the
// node's (NodeProbe's, the same as pleg doctor's live view); it returns
// when each has ended or been abandoned.
func (r *Recorder) probe(ctx context.Context, onset time.Time) *probed {
	now, timeout := r.cfg.Now, r.cfg.PartTimeout
	var (
		wg sync.WaitGroup
		p  probed
	)
	wg.Go(func() {
		p.view, p.pPleg = runPart(ctx, PartPleg, timeout, now, func(context.Context) (*PlegView, partResult) {
			return r.plegView(), partResult{}
		})
	})
	wg.Go(func() { p.version, p.pVer = runPart(ctx, PartVersion, timeout, now, r.runtimeVersion) })
	wg.Go(func() { p.stacks, p.pStk = runPart(ctx, PartRuntimeStacks, timeout, now, r.runtimeStacks) })
	wg.Go(func() { p.node = r.node.probe(ctx, onset) })
	wg.Wait()
	return &p
}

// runtimeVersion asks the runtime its name and version.
func (r *Recorder) runtimeVersion(ctx context.Context) (*RuntimeState, partResult) {
	if r.cfg.Runtime == nil {
		return nil, partResult{skipped: "the runtime does not tell its version"}
	}
	v, err := r.cfg.Runtime.Version(ctx)
	if err != nil {
		return nil, partResult{err: err}
	}
	return &RuntimeState{Name: v.GetRuntimeName(), Version: v.GetRuntimeVersion()}, partResult{}
}

// assemble puts what the parts found into rec, with each part's start
// and end on the timeline.
func (r *Recorder) assemble(rec *Recording, p *probed) {
	n := p.node
	rec.Parts = []Part{p.pPleg, p.pVer, n.pProc, p.pStk, n.pHost, n.pMnt, n.pLog, n.pK}
	rec.Pleg = p.view
	rt := &RuntimeState{Endpoint: r.cfg.Endpoint}
	if p.version != nil {
		rt.Name, rt.Version = p.version.Name, p.version.Version
	}
	if p.stacks != nil {
		rt.Stacks, rt.StacksSource = p.stacks.Stacks, p.stacks.StacksSource
	}
	rec.Runtime = rt
	r.node.assemble(rec, n)
}

// write writes rec, drops the oldest past the bounds, counts, logs and
// tells OnRecording.
func (r *Recorder) write(rec *Recording) error {
	dropped, err := r.store.Write(rec)
	if err != nil {
		r.dropped.WithLabelValues("error").Inc()
		r.cfg.Logger.Error("The flight recorder could not write its recording", "name", rec.Name, "err", err)
		return err
	}
	r.taken.WithLabelValues(rec.Trigger).Inc()
	r.dropped.WithLabelValues("bounds").Add(float64(len(dropped)))
	path := filepath.Join(r.store.Dir, rec.Name+ext)
	r.cfg.Logger.Warn("Flight recording taken: read it with `pleg doctor recordings "+rec.Name+"`",
		"recording", rec.Name, "trigger", rec.Trigger, "reason", rec.Reason, "path", path,
		"took", rec.Finished.Sub(rec.Started).Round(time.Millisecond))
	if r.cfg.OnRecording != nil {
		r.cfg.OnRecording(rec, path)
	}
	return nil
}

// partOutcome is a word on how a part ended, for the timeline.
func partOutcome(p Part) string {
	switch {
	case p.TimedOut:
		return "timed out"
	case p.Skipped != "":
		return "skipped: " + p.Skipped
	case p.Error != "":
		return "error: " + p.Error
	case p.Truncated:
		return "truncated"
	}
	return "ok"
}

// plegView is pleg's own view: its calls and its generator's status.
func (r *Recorder) plegView() *PlegView {
	now := r.cfg.Now()
	v := &PlegView{
		InFlight: r.cfg.Calls.InFlight(now),
		Recent:   r.cfg.Calls.Recent(),
		Stream:   r.cfg.Calls.Stream(),
	}
	st := r.cfg.Source.Status()
	ok, err := r.cfg.Source.Healthy()
	v.Status = generatorStatus(st, ok, err)
	return v
}

func generatorStatus(st pleg.Status, ok bool, err error) *GeneratorStatus {
	g := &GeneratorStatus{
		Mode: string(st.Mode), Evented: st.Evented, StreamConnected: st.StreamConnected, StreamSince: st.StreamSince,
		NoStream: st.NoStream, RelistThreshold: st.RelistThreshold.Seconds(), LastRelist: st.LastRelist,
		RelistInFlightSince: st.RelistInFlightSince, ListFailingSince: st.ListFailingSince, Healthy: ok,
	}
	if st.StreamError != nil {
		g.StreamError = st.StreamError.Error()
	}
	if st.ListError != nil {
		g.ListError = st.ListError.Error()
	}
	if err != nil {
		g.HealthError = err.Error()
	}
	for _, f := range st.FailingPods {
		fp := FailingPod{UID: f.UID, Name: f.Name, Namespace: f.Namespace, Since: f.Since, Deadline: f.Deadline}
		if f.Err != nil {
			fp.Error = f.Err.Error()
		}
		g.FailingPods = append(g.FailingPods, fp)
	}
	return g
}

// runtimeStacks takes the runtime's goroutine stacks: containerd's from
// its debug socket, or CRI-O's dump when opted in.
func (r *Recorder) runtimeStacks(ctx context.Context) (*RuntimeState, partResult) {
	switch {
	case r.cfg.DebugSocket != "":
		s, trunc, err := containerdStacks(ctx, r.cfg.DebugSocket, r.cfg.MaxPartBytes)
		return &RuntimeState{Stacks: s, StacksSource: "containerd debug socket " + r.cfg.DebugSocket},
			partResult{truncated: trunc, err: err}
	case r.cfg.CRIOStacks:
		pid := r.node.runtimePID()
		s, trunc, err := crioStacks(ctx, r.node.proc, pid, r.cfg.MaxPartBytes)
		return &RuntimeState{Stacks: s, StacksSource: "CRI-O SIGUSR1 dump of pid " + strconv.Itoa(pid)},
			partResult{truncated: trunc, err: err}
	}
	return nil, partResult{skipped: "no debug socket (--flight-recorder-debug-socket) and CRI-O's dump not opted in " +
		"(--flight-recorder-crio-stacks)"}
}
