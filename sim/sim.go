// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sim is a simulated CRI v1 container runtime: a real gRPC server
// on a unix socket, the same wire as containerd, serving the
// RuntimeService (sandboxes, containers, statuses, made-up stats, the
// Stream* lists and GetContainerEvents) and the ImageService (images as
// metadata, pulled from a simulated Registry), over an in-memory runtime
// that keeps the CRI's contract as cri-tools' critest checks it (see
// testdata/critest-impossible.txt for what needs a kernel), with:
//
//   - a workload of N pods × M containers carrying the kubelet's labels and
//     annotations, and churn at set rates (crashes and restarts, clean
//     exits, pod replacements, short-lived containers), with exited
//     containers collected or left to accumulate (Options);
//   - a latency model per operation: lognormal by p50 and p99, plus a
//     per-item cost (LatencyModel, LatencyPreset);
//   - GetContainerEvents with containerd's or CRI-O's semantics (EventMode);
//   - faults switchable at run time: errors, hangs, stream drops,
//     Unimplemented events, restarts, oversized and malformed lists
//     (Faults, SetFaults, Restart).
//
// Everything the workload does is decided by Options.Seed over a fixed
// order, so the same seed and the same number of Step calls give the same
// History: tests and benchmarks replay a runtime exactly.
//
// A Sim is started in-process (New, Start, Stop), or served by
// `pleg sim`.
package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg/internal/unixsock"
)

// Sim is a simulated CRI runtime. Its methods are safe for concurrent use.
type Sim struct {
	opts   Options
	log    *slog.Logger
	clock  clock.WithTicker
	st     *store
	work   *workload
	lat    *latencies
	images *images

	faults   atomic.Pointer[activeFaults]
	faultsMu sync.Mutex // serializes SetFaults
	errMu    sync.Mutex
	errRng   *rand.Rand

	// queue is nil while a restart keeps the runtime down.
	queue  atomic.Pointer[queue]
	events eventStats
	calls  [numOps]atomic.Uint64

	runMu   sync.Mutex
	started bool
	stopped bool
	server  *grpc.Server
	lis     *unixsock.Listener
	serving atomic.Bool
	stopC   chan struct{}
	wg      sync.WaitGroup
}

// New builds a simulator with its initial pods running: Options.Pods pods
// of Options.Containers running containers each (after Options.Exited
// exited ones), with IDs and UIDs derived
// from the seed. It serves nothing until Start, but Step works at once.
// Call Stop to release it, started or not.
func New(opts Options) (*Sim, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	reg, _ := opts.Registry.normalized() // checked by withDefaults
	s := &Sim{
		opts:   opts,
		log:    opts.Logger,
		clock:  opts.Clock,
		st:     newStore(opts.Seed, opts.Clock, opts.Events, opts.HistoryLimit),
		work:   newWorkload(opts, reg.imageIDOf(WorkloadImage)),
		lat:    newLatencies(opts.Latency, opts.Seed, opts.Clock),
		images: newImages(reg, PauseImage, WorkloadImage),
		errRng: rand.New(rand.NewPCG(opts.Seed, 0x6572726f72)),
		stopC:  make(chan struct{}),
	}
	s.faults.Store(compileFaults(opts.Faults))
	s.st.mu.Lock()
	for range opts.Pods {
		s.work.newPod(s.st, opts.Exited, CauseInitial, nil)
	}
	s.st.mu.Unlock()
	s.queue.Store(newQueue(opts.Events, opts.Clock, &s.events))
	return s, nil
}

// Start listens on Options.Socket, removing a stale socket file first,
// serves the CRI there, and starts the churn ticker when there is churn.
// When ctx ends the simulator stops. A Sim starts once.
func (s *Sim) Start(ctx context.Context) error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	switch {
	case s.stopped:
		return errors.New("sim: stopped")
	case s.started:
		return errors.New("sim: already started")
	case s.opts.Socket == "":
		return errors.New("sim: no socket path")
	}
	if err := s.serveLocked(); err != nil {
		return err
	}
	s.started = true
	if !s.opts.Churn.IsZero() {
		s.wg.Add(1)
		go s.churnLoop()
	}
	context.AfterFunc(ctx, func() { _ = s.Stop() })
	s.log.Info("Simulated CRI runtime serving", "endpoint", s.Endpoint(), "pods", s.opts.Pods,
		"containers", s.opts.Containers, "churn", s.opts.Churn.String(), "events", s.opts.Events.String(),
		"faults", s.faults.Load().String(), "seed", s.opts.Seed)
	return nil
}

// serveLocked listens and serves; the caller holds runMu. The socket is
// created as every socket pleg serves (internal/unixsock): mode 0660, a
// socket another process serves is refused, a stale one replaced, and
// closing the listener removes it only if it is still ours.
func (s *Sim) serveLocked() error {
	lis, err := unixsock.Listen(s.opts.Socket, unixsock.Options{})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.lis = lis
	// No send limit: whether a large list passes is the client's receive
	// limit to decide, which is what the oversize fault exercises.
	// (containerd's own default send limit is 16 MiB.)
	srv := grpc.NewServer(grpc.MaxSendMsgSize(1<<31-1), grpc.ForceServerCodecV2(newWireCodec()))
	srv.RegisterService(runtimeServiceDesc(), &runtimeServer{s: s})
	runtimeapi.RegisterImageServiceServer(srv, &imageServer{s: s})
	s.server = srv
	s.serving.Store(true)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("Simulated runtime stopped serving", "err", err)
		}
	}()
	return nil
}

func (s *Sim) churnLoop() {
	defer s.wg.Done()
	t := s.clock.NewTicker(s.opts.Churn.Tick)
	defer t.Stop()
	for {
		select {
		case <-s.stopC:
			return
		case <-t.C():
			s.Step()
		}
	}
}

// Stop stops serving and churning, ends open streams and calls, and
// removes the socket. It is idempotent.
func (s *Sim) Stop() error {
	s.runMu.Lock()
	if s.stopped {
		s.runMu.Unlock()
		return nil
	}
	s.stopped = true
	close(s.stopC)
	srv, lis := s.server, s.lis
	s.server = nil
	s.serving.Store(false)
	q := s.queue.Swap(nil)
	s.runMu.Unlock()

	// The queue first: that releases publishers waiting on a slow
	// subscriber, so that a churn tick in progress can end.
	if q != nil {
		q.shutdown()
	}
	if srv != nil {
		srv.Stop()
	}
	s.wg.Wait()
	if lis != nil {
		// Serve closed it already, unless Stop came first; closing
		// removes the socket.
		return closeListener(lis)
	}
	return nil
}

// closeListener closes lis, which removes its socket, and reports a
// failure to remove it.
func closeListener(lis *unixsock.Listener) error {
	if err := lis.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// Endpoint returns the CRI endpoint of the socket: "unix://" + Socket.
func (s *Sim) Endpoint() string { return "unix://" + s.opts.Socket }

// Step applies one churn tick now. The ticker started by Start calls it
// every Churn.Tick; tests call it directly for a deterministic sequence.
// Its events are published before it returns, so in containerd mode it
// waits while a subscriber does not read, as containerd's event monitor
// does.
func (s *Sim) Step() {
	s.work.mu.Lock()
	defer s.work.mu.Unlock()
	var out eventBuf
	s.st.mu.Lock()
	s.work.tick(s.st, &out)
	s.st.mu.Unlock()
	s.publish(out)
}

// publish hands events to the queue; while the runtime is down they are
// lost.
func (s *Sim) publish(events eventBuf) {
	if len(events) == 0 {
		return
	}
	q := s.queue.Load()
	if q == nil {
		s.events.discarded.Add(uint64(len(events)))
		return
	}
	for _, ev := range events {
		q.publish(ev)
	}
}

// History returns the runtime changes so far, oldest first: the last
// Options.HistoryLimit of them.
func (s *Sim) History() []Change {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	return s.st.history.list()
}

// SetFaults replaces the faults in force. Calls already waiting in a hang
// keep waiting; open event streams take a new drop period at once.
func (s *Sim) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	old := s.faults.Swap(compileFaults(f))
	close(old.changed)
	s.log.Info("Simulated runtime faults set", "faults", f.String())
	return nil
}

// Faults returns the faults in force.
func (s *Sim) Faults() Faults { return s.faults.Load().clone() }

// Restart simulates a runtime restart: the socket goes away, open streams
// and calls end, queued events are lost, and after down (on Options.Clock)
// the socket comes back with an empty event queue. Pods and containers
// keep running, and churn goes on meanwhile; the events of changes made
// while down are lost. Restart returns once the runtime serves again.
func (s *Sim) Restart(down time.Duration) error {
	s.runMu.Lock()
	switch {
	case s.stopped:
		s.runMu.Unlock()
		return errors.New("sim: stopped")
	case !s.started:
		s.runMu.Unlock()
		return errors.New("sim: not started")
	case s.server == nil:
		s.runMu.Unlock()
		return errors.New("sim: already restarting")
	}
	srv, lis := s.server, s.lis
	s.server = nil
	s.serving.Store(false)
	q := s.queue.Swap(nil)
	s.runMu.Unlock()

	s.log.Info("Simulated runtime restarting", "down", down)
	q.shutdown()
	srv.Stop()
	if err := closeListener(lis); err != nil {
		return err
	}
	if down > 0 {
		t := s.clock.NewTimer(down)
		defer t.Stop()
		select {
		case <-t.C():
		case <-s.stopC:
			return nil
		}
	}

	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.stopped {
		return nil
	}
	s.queue.Store(newQueue(s.opts.Events, s.clock, &s.events))
	if err := s.serveLocked(); err != nil {
		return err
	}
	s.log.Info("Simulated runtime serving again", "endpoint", s.Endpoint())
	return nil
}

// Stats is a snapshot of the simulator, for summaries.
type Stats struct {
	// Serving is false before Start, after Stop and while restarting.
	Serving bool
	// Ticks is the number of churn ticks applied; Changes the number of
	// runtime changes made, including those History no longer holds.
	Ticks   uint64
	Changes uint64

	// Pods counts ready sandboxes; PodsNotReady stopped ones not yet
	// removed.
	Pods         int
	PodsNotReady int
	// Containers by state.
	ContainersCreated int
	ContainersRunning int
	ContainersExited  int

	// EventsPublished counts events handed to the queue; EventsSent the
	// events written to subscribers' streams (one per subscriber);
	// EventsDropped those CRI-O mode dropped because its queue was full;
	// EventsDiscarded those lost otherwise: expired from containerd's
	// backlog, or lost to a restart or stop.
	EventsPublished uint64
	EventsSent      uint64
	EventsDropped   uint64
	EventsDiscarded uint64
	// EventsBacklog is the number of events containerd mode holds for the
	// first subscriber to come.
	EventsBacklog int
	// PublishersWaiting is the number of runtime changes waiting for the
	// containerd-mode queue to take their event: more than zero for long
	// means a subscriber that does not read is stalling the runtime.
	PublishersWaiting int
	// EventsStalled tells that the containerd-mode queue is waiting for a
	// subscriber whose buffer of 100 is full.
	EventsStalled bool
	// Subscribers is the number of open event streams.
	Subscribers int

	// Calls counts the calls of each operation.
	Calls map[string]uint64
}

// Stats returns a snapshot of the simulator's state and counters.
func (s *Sim) Stats() Stats {
	st := Stats{
		Serving:           s.serving.Load(),
		EventsPublished:   s.events.published.Load(),
		EventsSent:        s.events.sent.Load(),
		EventsDropped:     s.events.dropped.Load(),
		EventsDiscarded:   s.events.discarded.Load(),
		EventsBacklog:     int(s.events.backlog.Load()),
		PublishersWaiting: int(s.events.waiting.Load()),
		EventsStalled:     s.events.stalled.Load(),
		Subscribers:       int(s.events.subscribers.Load()),
		Calls:             make(map[string]uint64),
	}
	for o := range numOps {
		if n := s.calls[o].Load(); n > 0 {
			st.Calls[o.String()] = n
		}
	}
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	st.Ticks = s.st.tick
	st.Changes = s.st.history.total
	for _, sb := range s.st.sandboxes {
		if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY {
			st.Pods++
		} else {
			st.PodsNotReady++
		}
	}
	for _, c := range s.st.containers {
		switch c.state {
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			st.ContainersCreated++
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			st.ContainersRunning++
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			st.ContainersExited++
		}
	}
	return st
}
