package pleg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg/metrics"
	"github.com/plegkit/pleg/runtime"
)

// Evented operation.
//
// A runtime's event stream tells that something happened to a pod, not
// reliably what: containerd replays minutes of old events to a new
// subscriber, CRI-O drops events past 1000, and payloads are snapshots
// taken when sent. So an event is a hint: it triggers a relist of its pod,
// which lists, inspects, writes the cache and yields events exactly as a
// global relist does. The cache keeps one writer, which is what the
// kubelet's classic EventedPLEG lacked. While the stream holds, global
// relists slow to EventedRelistPeriod, a safety net; while it is down they
// keep RelistPeriod, and the stream is retried for as long as it takes.
//
// What a relist cannot see, hints remember: a container created, exited
// and removed between two relists is reported from its hints, Started,
// Died and Removed, once a relist finds it gone.

const (
	// streamHold is how long the stream must stay up before it drives;
	// until then global relists keep the normal period.
	streamHold = 5 * time.Second
	// Reconnects back off from retryMin to retryMax, with jitter.
	retryMin = 100 * time.Millisecond
	retryMax = 30 * time.Second
	// firstAttemptWait bounds how long the first relist waits for the
	// stream: subscribing first means no change falls between the list
	// and the stream.
	firstAttemptWait = 5 * time.Second
	// hintTTL is how long a hint about a container that no relist found
	// gone waits before it is dropped.
	hintTTL = time.Minute
	// tombstoneTTL is how long the ID of a removed container is kept, so
	// that a late DELETED does not report it again.
	tombstoneTTL = 10 * time.Minute
)

// streamState is what is known of the event stream.
type streamState struct {
	mu          sync.Mutex
	connected   bool
	since       time.Time // up since, or down since
	err         error     // what ended it last
	unsupported bool      // the runtime has no stream
	attempted   chan struct{}
	once        sync.Once
}

func newStreamState() *streamState {
	return &streamState{attempted: make(chan struct{})}
}

func (s *streamState) up(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connected, s.since, s.err, s.unsupported = true, at, nil, false
}

func (s *streamState) down(at time.Time, err error, unsupported bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connected || s.since.IsZero() {
		s.since = at
	}
	s.connected, s.err, s.unsupported = false, err, unsupported
}

func (s *streamState) attemptDone() { s.once.Do(func() { close(s.attempted) }) }

// holding reports whether the stream has been up for streamHold.
func (s *streamState) holding(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected && now.Sub(s.since) >= streamHold
}

func (s *streamState) snapshot() (connected bool, since time.Time, err error, unsupported bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected, s.since, s.err, s.unsupported
}

// Status describes how the generator learns of changes at the moment.
type Status struct {
	// Mode is the configured mode.
	Mode Mode
	// Evented tells that the event stream holds and drives relists.
	Evented bool
	// StreamConnected and StreamSince: whether the event stream is up, and
	// since when it is up or down; zero without a stream.
	StreamConnected bool
	StreamSince     time.Time
	// StreamError is what ended the stream last, if it is down.
	StreamError error
	// NoStream tells that the runtime has no event stream.
	NoStream bool
	// RelistPeriod and RelistThreshold are those in force.
	RelistPeriod    time.Duration
	RelistThreshold time.Duration
}

// String is a line for humans, e.g. for a health page.
func (s Status) String() string {
	switch {
	case s.Mode == ModeGeneric:
		return fmt.Sprintf("mode generic: relisting every %v", s.RelistPeriod)
	case s.Evented:
		return fmt.Sprintf("mode %s: evented, the container event stream connected since %s; safety-net relist every %v",
			s.Mode, s.StreamSince.UTC().Format(time.RFC3339), s.RelistPeriod)
	case s.NoStream:
		return fmt.Sprintf("mode %s: relisting every %v; the runtime has no container event stream", s.Mode, s.RelistPeriod)
	case s.StreamConnected:
		return fmt.Sprintf("mode %s: relisting every %v; the container event stream reconnected at %s and drives once it has held for %v",
			s.Mode, s.RelistPeriod, s.StreamSince.UTC().Format(time.RFC3339), streamHold)
	default:
		return fmt.Sprintf("mode %s: relisting every %v; the container event stream is down since %s: %v",
			s.Mode, s.RelistPeriod, s.StreamSince.UTC().Format(time.RFC3339), s.StreamError)
	}
}

// Status returns how the generator learns of changes at the moment.
func (g *Generator) Status() Status {
	s := Status{Mode: g.opts.Mode, RelistPeriod: g.period(), RelistThreshold: g.threshold()}
	if g.source != nil {
		s.StreamConnected, s.StreamSince, s.StreamError, s.NoStream = g.stream.snapshot()
		s.Evented = g.evented()
	}
	return s
}

// evented reports whether the event stream drives relists now.
func (g *Generator) evented() bool {
	return g.source != nil && g.stream.holding(g.clock.Now())
}

// period is the pause between global relists in force.
func (g *Generator) period() time.Duration {
	if g.evented() {
		return g.opts.EventedRelistPeriod
	}
	return g.opts.RelistPeriod
}

// threshold is the health threshold in force.
func (g *Generator) threshold() time.Duration {
	if g.evented() {
		return g.opts.EventedRelistThreshold
	}
	return g.opts.RelistThreshold
}

func (g *Generator) updateMode() {
	if g.evented() {
		g.metrics.SetMode(metrics.ModeEvented)
	} else {
		g.metrics.SetMode(metrics.ModeGeneric)
	}
}

// requestGlobalRelist asks the loop for a global relist now.
func (g *Generator) requestGlobalRelist() {
	select {
	case g.relistNow <- struct{}{}:
	default:
	}
}

// watchEvents keeps the event stream open for as long as ctx lasts: it
// reads every event at once into the hint book and the relist queue, so
// that the runtime never waits on us (a slow reader stalls containerd's own
// handlers), and reconnects with capped, jittered backoff whenever the
// stream ends. Unlike the kubelet, it never gives up.
func (g *Generator) watchEvents(ctx context.Context) {
	defer g.stream.attemptDone()
	delay := time.Duration(0)
	backoff := retryMin
	for {
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-g.clock.After(delay):
			}
			g.metrics.StreamReconnects.Inc()
		}
		start := g.clock.Now()
		s, err := g.source.GetContainerEvents(ctx)
		opened := err == nil
		if opened {
			g.metrics.EventedConnectionSuccess.Inc()
			g.metrics.StreamConnected.Set(1)
			g.stream.up(start)
			g.stream.attemptDone()
			g.log.Info("Container event stream connected")
			// What changed while the stream was down is only in a list.
			g.requestGlobalRelist()
			err = g.drainEvents(ctx, s, start)
		}
		g.stream.attemptDone()
		if ctx.Err() != nil {
			g.stream.down(g.clock.Now(), ctx.Err(), false)
			g.metrics.StreamConnected.Set(0)
			return
		}
		held := opened && g.clock.Since(start) >= streamHold
		// CRI-O with events off closes at once; a runtime without the RPC
		// answers Unimplemented: both mean there is no stream.
		unsupported := status.Code(err) == codes.Unimplemented || (opened && !held && errors.Is(err, io.EOF))
		g.metrics.StreamConnected.Set(0)
		g.metrics.EventedConnectionErrors.Inc()
		g.stream.down(g.clock.Now(), err, unsupported)
		g.updateMode()
		if opened {
			// Events may have been lost: the list knows.
			g.requestGlobalRelist()
		}
		switch {
		case unsupported && g.opts.Mode == ModeAuto:
			g.log.Info("The runtime has no container event stream; relisting alone", "err", err, "retryIn", g.opts.NoStreamRetry)
			delay = g.opts.NoStreamRetry
		case held:
			g.log.Warn("Container event stream ended; reconnecting", "err", err, "connectedFor", g.clock.Since(start))
			delay, backoff = 0, retryMin
		default:
			g.log.Warn("Container event stream failed; relisting every period until it is back", "err", err, "retryIn", backoff)
			delay = jitter(backoff)
			backoff = min(2*backoff, retryMax)
		}
	}
}

// jitter spreads d by ±20%, so that the nodes of a cluster whose runtimes
// restarted together do not reconnect together.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// drainEvents reads the stream until it ends.
func (g *Generator) drainEvents(ctx context.Context, s runtime.EventStream, connectedAt time.Time) error {
	for {
		ev, err := s.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		g.handleEvent(ev, connectedAt)
	}
}

// handleEvent turns an event into a hint and a relist request for its pod.
func (g *Generator) handleEvent(ev *runtimeapi.ContainerEventResponse, connectedAt time.Time) {
	now := g.clock.Now()
	var sent time.Time
	if ev.GetCreatedAt() > 0 {
		sent = time.Unix(0, ev.GetCreatedAt())
		g.metrics.EventedLatency.Observe(now.Sub(sent).Seconds())
	}
	// An event sent before we subscribed is backlog: it still asks for a
	// relist, but what it says is old news and reports nothing itself.
	replay := !sent.IsZero() && sent.Before(connectedAt)
	uid, ok := g.hints.note(ev, replay, now)
	label := "replayed"
	if !replay {
		label = eventTypeLabel(ev.GetContainerEventType())
	}
	g.metrics.Hints.WithLabelValues(label).Inc()
	if !ok {
		g.log.Debug("Container event for a container of an unknown pod; the next relist will see it", "containerID", ev.GetContainerId(), "type", ev.GetContainerEventType())
		return
	}
	if !g.requests.add(uid, now) {
		g.metrics.HintsCoalesced.Inc()
	}
}

func eventTypeLabel(t runtimeapi.ContainerEventType) string {
	switch t {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return "created"
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return "started"
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return "stopped"
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		return "deleted"
	default:
		return "unknown"
	}
}

// stage is a step of a container's life an event reported.
type stage uint8

const (
	stageCreated stage = 1 << iota
	stageStarted
	stageStopped
	stageDeleted
)

func stageOf(t runtimeapi.ContainerEventType) stage {
	switch t {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return stageCreated
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return stageStarted
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return stageStopped
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		return stageDeleted
	default:
		return 0
	}
}

// hint is what the events said of one container or sandbox.
type hint struct {
	id      string
	name    string
	sandbox bool
	stages  stage
	last    time.Time
}

// transitions are the state changes the hinted stages imply, from not
// existing to gone: created is unknown, started running, stopped exited.
func (h *hint) transitions() []transition {
	states := []state{stateNonExistent}
	for _, s := range []struct {
		stage
		state
	}{{stageCreated, stateUnknown}, {stageStarted, stateRunning}, {stageStopped, stateExited}} {
		if h.stages&s.stage != 0 {
			states = append(states, s.state)
		}
	}
	states = append(states, stateNonExistent)
	var out []transition
	for i := 1; i < len(states); i++ {
		if states[i] != states[i-1] {
			out = append(out, transition{id: h.id, name: h.name, sandbox: h.sandbox, old: states[i-1], new: states[i]})
		}
	}
	return out
}

// podHints are the hints about one pod, in the order they came.
type podHints struct {
	name, namespace string
	items           []*hint
}

// hintBook holds hints until a relist of their pod consumes them. It is
// bounded by the containers that exist or have just gone, not by events:
// a container's hints fold into one.
type hintBook struct {
	mu   sync.Mutex
	pods map[string]*podHints
	// owner maps sandbox and container IDs to their pod, for events that
	// come without a sandbox status (containerd sends none when the
	// sandbox is already gone).
	owner map[string]string
	// removed holds the IDs of containers reported removed, and when.
	removed map[string]time.Time
}

func newHintBook() *hintBook {
	return &hintBook{pods: make(map[string]*podHints), owner: make(map[string]string), removed: make(map[string]time.Time)}
}

// note records an event and returns its pod. A replayed event only tells
// the pod.
func (b *hintBook) note(ev *runtimeapi.ContainerEventResponse, replay bool, now time.Time) (uid string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := ev.GetContainerId()
	sb := ev.GetPodSandboxStatus()
	uid = sb.GetMetadata().GetUid()
	if uid == "" {
		uid = b.owner[id]
	}
	if uid == "" || id == "" {
		return "", false
	}
	if sb.GetId() != "" {
		b.owner[sb.GetId()] = uid
	}
	b.owner[id] = uid
	name := ""
	for _, c := range ev.GetContainersStatuses() {
		if c.GetId() == id {
			name = c.GetMetadata().GetName()
		}
		if c.GetId() != "" {
			b.owner[c.GetId()] = uid
		}
	}
	if replay {
		return uid, true
	}
	ph := b.pods[uid]
	if ph == nil {
		ph = &podHints{}
		b.pods[uid] = ph
	}
	if md := sb.GetMetadata(); md != nil && md.GetName() != "" {
		ph.name, ph.namespace = md.GetName(), md.GetNamespace()
	}
	var h *hint
	for _, x := range ph.items {
		if x.id == id {
			h = x
		}
	}
	if h == nil {
		h = &hint{id: id, sandbox: id == sb.GetId()}
		ph.items = append(ph.items, h)
	}
	if name != "" {
		h.name = name
	}
	h.stages |= stageOf(ev.GetContainerEventType())
	h.last = now
	return uid, true
}

// hinted returns the pods with hints; nil when none has.
func (b *hintBook) hinted() map[string]*podHints {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pods) == 0 {
		return nil
	}
	out := make(map[string]*podHints, len(b.pods))
	for uid, ph := range b.pods {
		out[uid] = &podHints{name: ph.name, namespace: ph.namespace}
	}
	return out
}

// hintKey names a hinted container or sandbox.
type hintKey struct {
	id      string
	sandbox bool
}

// take consumes the hints of pod uid after a relist of it. known tells
// whether the relist's record knows a container: then the relist reports
// it, and seen returns the stages the stream reported, which can tell of a
// state the relist came too late to see. The hints of a container the
// record does not know and that the stream said was deleted become its
// transitions, unless it was reported removed already. Hints of containers
// neither known nor deleted wait, for a while, for a relist that settles
// them.
func (b *hintBook) take(uid string, known func(id string, sandbox bool) bool, now time.Time) (extra []transition, seen map[hintKey]stage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ph := b.pods[uid]
	if ph == nil {
		return nil, nil
	}
	kept := ph.items[:0]
	for _, h := range ph.items {
		_, removed := b.removed[h.id]
		switch {
		case known(h.id, h.sandbox):
			if seen == nil {
				seen = make(map[hintKey]stage)
			}
			seen[hintKey{h.id, h.sandbox}] = h.stages
		case removed:
		case h.stages&stageDeleted != 0:
			extra = append(extra, h.transitions()...)
			b.removed[h.id] = now
		case now.Sub(h.last) > hintTTL:
		default:
			kept = append(kept, h)
			continue
		}
		if h.stages&stageDeleted != 0 {
			delete(b.owner, h.id)
		}
	}
	ph.items = kept
	if len(kept) == 0 {
		delete(b.pods, uid)
	}
	return extra, seen
}

// expand fills in the states a transition skipped that the stream saw: a
// container that started and exited between two relists goes from not
// existing to exited, and the stream tells that it ran. States are taken
// in the order a container lives them; created stays silent, as always.
func expand(t transition, seen stage) []transition {
	rank := func(s state, after bool) int {
		switch s {
		case stateUnknown:
			return 1
		case stateRunning:
			return 2
		case stateExited:
			return 3
		case stateNonExistent:
			if after {
				return 4 // removed
			}
		}
		return 0 // not created yet
	}
	from, to := rank(t.old, false), rank(t.new, true)
	if seen == 0 || to <= from {
		return []transition{t}
	}
	states := []state{t.old}
	if seen&stageStarted != 0 && from < 2 && 2 < to {
		states = append(states, stateRunning)
	}
	if seen&stageStopped != 0 && from < 3 && 3 < to {
		states = append(states, stateExited)
	}
	if len(states) == 1 {
		return []transition{t}
	}
	states = append(states, t.new)
	out := make([]transition, 0, len(states)-1)
	for i := 1; i < len(states); i++ {
		x := t
		x.old, x.new = states[i-1], states[i]
		out = append(out, x)
	}
	return out
}

// tombstone records that the relist reported containers removed.
func (b *hintBook) tombstone(ts []transition, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range ts {
		if t.new == stateNonExistent {
			b.removed[t.id] = now
			delete(b.owner, t.id)
		}
	}
}

// prune forgets old tombstones and hints no relist settled.
func (b *hintBook) prune(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, at := range b.removed {
		if now.Sub(at) > tombstoneTTL {
			delete(b.removed, id)
		}
	}
	for uid, ph := range b.pods {
		ph.items = slices.DeleteFunc(ph.items, func(h *hint) bool { return now.Sub(h.last) > hintTTL })
		if len(ph.items) == 0 {
			delete(b.pods, uid)
		}
	}
}
