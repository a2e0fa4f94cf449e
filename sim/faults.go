// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// Faults are failures the simulator injects. Each can be set in Options
// and switched at run time with SetFaults. The zero value injects none.
type Faults struct {
	// ErrorRate fails calls of an operation (runtime.OpListContainers, ...) with
	// the given probability, 0 to 1, answering ErrorCode. The key "*"
	// applies to every operation without its own entry. The Stream* lists
	// count as the list they stream.
	ErrorRate map[string]float64
	// ErrorCode is the code of injected errors; default Unavailable.
	ErrorCode codes.Code
	// Hang makes every call of an operation block until the caller's
	// deadline or cancellation.
	Hang map[string]bool
	// HangPod makes PodSandboxStatus and ContainerStatus block likewise
	// for the sandboxes of the pod with this UID and their containers.
	HangPod string
	// SlowPod delays ContainerStatus, beyond the latency model, for the
	// containers of each pod whose UID it maps to a delay: one pod whose
	// inspection is slow, as when its containers' shim is busy.
	SlowPod map[string]time.Duration
	// StreamDropEvery ends each event stream with an Unavailable error
	// this long after it was opened; 0 never does.
	StreamDropEvery time.Duration
	// EventsUnimplemented makes GetContainerEvents answer Unimplemented,
	// as runtimes without it do (containerd 1.6).
	EventsUnimplemented bool
	// OversizeLists pads every item of ListPodSandbox and ListContainers
	// with a large annotation so that the whole answer exceeds 17 MiB,
	// past the 16 MiB a kubelet accepts, without changing what exists. The
	// Stream* lists send the padded items in messages of at most 4 MiB, as
	// a streaming runtime would, unless one item alone is larger.
	OversizeLists bool
	// Malformed corrupts items of every list as it is answered.
	Malformed Malformed
}

// Malformed says how many items of each list answer to corrupt. Distinct
// items are chosen, from the start of the list: first those losing their
// metadata, then those with an unknown state, then those listed twice.
type Malformed struct {
	// NilMetadata items are listed without metadata.
	NilMetadata int
	// UnknownState items have a state CRI does not define (7).
	UnknownState int
	// DuplicateIDs items are listed a second time, at the end.
	DuplicateIDs int
}

// IsZero reports whether m corrupts nothing.
func (m Malformed) IsZero() bool { return m == Malformed{} }

// UnknownState is the state value the Malformed fault gives items.
const UnknownState = 7

// oversizeTarget is the total padding the OversizeLists fault adds to a
// list answer: past kubelet's 16 MiB limit whatever the items weigh.
const oversizeTarget = 17<<20 + 512<<10

// streamBatchBytes bounds a streamed list message holding padded items.
const streamBatchBytes = 4 << 20

func (f Faults) validate() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(f.ErrorRate)) {
		if _, ok := lookupOp(name); !ok && name != "*" {
			errs = append(errs, fmt.Errorf("faults: error rate of unknown operation %q", name))
		}
		if r := f.ErrorRate[name]; !(r >= 0 && r <= 1) { // NaN too
			errs = append(errs, fmt.Errorf("faults: error rate %v of %s must be within 0 and 1", r, name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Hang)) {
		if _, ok := lookupOp(name); !ok {
			errs = append(errs, fmt.Errorf("faults: hang of unknown operation %q", name))
		}
	}
	if f.ErrorCode > codes.Unauthenticated {
		errs = append(errs, fmt.Errorf("faults: unknown error code %d", f.ErrorCode))
	}
	for _, uid := range slices.Sorted(maps.Keys(f.SlowPod)) {
		if f.SlowPod[uid] < 0 {
			errs = append(errs, fmt.Errorf("faults: delay %v of pod %s must not be negative", f.SlowPod[uid], uid))
		}
	}
	if f.StreamDropEvery < 0 {
		errs = append(errs, errors.New("faults: stream drop period must not be negative"))
	}
	if f.Malformed.NilMetadata < 0 || f.Malformed.UnknownState < 0 || f.Malformed.DuplicateIDs < 0 {
		errs = append(errs, errors.New("faults: malformed counts must not be negative"))
	}
	return errors.Join(errs...)
}

// clone returns f with maps of its own, so the caller may change its own.
func (f Faults) clone() Faults {
	f.ErrorRate = maps.Clone(f.ErrorRate)
	f.Hang = maps.Clone(f.Hang)
	f.SlowPod = maps.Clone(f.SlowPod)
	return f
}

// activeFaults is Faults compiled for the per-call path. A new one
// replaces it on every change, and changed is closed then, so that open
// event streams pick up a new drop period.
type activeFaults struct {
	Faults
	errorRate [numOps]float64
	hang      [numOps]bool
	changed   chan struct{}
}

func compileFaults(f Faults) *activeFaults {
	f = f.clone()
	if f.ErrorCode == codes.OK {
		f.ErrorCode = codes.Unavailable
	}
	a := &activeFaults{Faults: f, changed: make(chan struct{})}
	all, hasAll := f.ErrorRate["*"]
	for o := range numOps {
		if r, ok := f.ErrorRate[o.String()]; ok {
			a.errorRate[o] = r
		} else if hasAll {
			a.errorRate[o] = all
		}
		a.hang[o] = f.Hang[o.String()]
	}
	return a
}

// ParseFaults parses the --faults flag: comma-separated items,
//
//	error=OP:RATE         fail calls of OP with probability RATE (0..1);
//	                      OP is an operation_type (list_containers, ...)
//	                      or * for all; repeatable
//	error-code=CODE       code of injected errors (default unavailable;
//	                      any gRPC code name: internal, unknown, ...)
//	hang=OP               calls of OP block until the caller's deadline;
//	                      repeatable
//	hang-pod=UID          status calls for that pod's sandboxes and
//	                      containers block likewise
//	slow-pod=UID:DURATION ContainerStatus for that pod's containers takes
//	                      DURATION longer (a Go duration: 300ms);
//	                      repeatable
//	drop=DURATION         event streams end with an error DURATION after
//	                      they open (a Go duration: 30s)
//	events=unimplemented  GetContainerEvents answers Unimplemented
//	oversize              list answers exceed 16 MiB
//	malformed=KIND:N      N items of each list corrupted; KIND is
//	                      nil-metadata, unknown-state or duplicate-ids;
//	                      repeatable
//
// For example "error=container_status:0.05,hang=list_containers,drop=30s,
// oversize,malformed=nil-metadata:2". The empty string and "none" mean no
// faults.
func ParseFaults(s string) (Faults, error) {
	var f Faults
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return f, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		key, value, _ := strings.Cut(item, "=")
		key, value = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(value)
		if err := f.parseItem(key, value); err != nil {
			return Faults{}, fmt.Errorf("faults %q: %s: %w", s, item, err)
		}
	}
	if err := f.validate(); err != nil {
		return Faults{}, err
	}
	return f, nil
}

// parseItem sets the fault one item of ParseFaults' list names.
func (f *Faults) parseItem(key, value string) error {
	switch key {
	case "error":
		return f.parseErrorRate(value)
	case "error-code":
		c, ok := parseCode(value)
		if !ok {
			return fmt.Errorf("unknown gRPC code %q", value)
		}
		f.ErrorCode = c
	case "hang":
		if value == "" {
			return errors.New("want hang=OP")
		}
		if f.Hang == nil {
			f.Hang = make(map[string]bool)
		}
		f.Hang[value] = true
	case "hang-pod":
		if value == "" {
			return errors.New("want hang-pod=UID")
		}
		f.HangPod = value
	case "slow-pod":
		return f.parseSlowPod(value)
	case "drop":
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return errors.New("want a positive duration")
		}
		f.StreamDropEvery = d
	case "events":
		if value != "unimplemented" {
			return errors.New("want events=unimplemented")
		}
		f.EventsUnimplemented = true
	case "oversize":
		if value != "" {
			return errors.New("oversize takes no value")
		}
		f.OversizeLists = true
	case "malformed":
		return f.parseMalformed(value)
	default:
		return fmt.Errorf("unknown fault %q", key)
	}
	return nil
}

// parseErrorRate parses error=OP:RATE.
func (f *Faults) parseErrorRate(value string) error {
	name, rate, ok := strings.Cut(value, ":")
	if !ok {
		return errors.New("want error=OP:RATE")
	}
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil {
		return fmt.Errorf("rate %q is not a number", rate)
	}
	if f.ErrorRate == nil {
		f.ErrorRate = make(map[string]float64)
	}
	f.ErrorRate[name] = r
	return nil
}

// parseSlowPod parses slow-pod=UID:DURATION.
func (f *Faults) parseSlowPod(value string) error {
	uid, delay, ok := strings.Cut(value, ":")
	if !ok || uid == "" {
		return errors.New("want slow-pod=UID:DURATION")
	}
	d, err := time.ParseDuration(delay)
	if err != nil || d <= 0 {
		return fmt.Errorf("delay %q must be a positive duration", delay)
	}
	if f.SlowPod == nil {
		f.SlowPod = make(map[string]time.Duration)
	}
	f.SlowPod[uid] = d
	return nil
}

// parseMalformed parses malformed=KIND:N, N 1 if left out.
func (f *Faults) parseMalformed(value string) error {
	kind, count, ok := strings.Cut(value, ":")
	if !ok {
		count = "1"
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return fmt.Errorf("count %q must be a non-negative integer", count)
	}
	switch kind {
	case "nil-metadata":
		f.Malformed.NilMetadata = n
	case "unknown-state":
		f.Malformed.UnknownState = n
	case "duplicate-ids":
		f.Malformed.DuplicateIDs = n
	default:
		return errors.New("want nil-metadata, unknown-state or duplicate-ids")
	}
	return nil
}

// parseCode parses a gRPC code name in any case, with or without
// separators: "unavailable", "ResourceExhausted", "resource-exhausted".
func parseCode(s string) (codes.Code, bool) {
	norm := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '-' || r == '_' || r == ' ' {
				return -1
			}
			return r
		}, strings.ToLower(s))
	}
	want := norm(s)
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if norm(c.String()) == want {
			return c, true
		}
	}
	return 0, false
}

// String formats f in ParseFaults' syntax; "none" when f injects nothing.
func (f Faults) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(f.ErrorRate)) {
		parts = append(parts, "error="+name+":"+strconv.FormatFloat(f.ErrorRate[name], 'g', -1, 64))
	}
	// The code only matters with an error rate.
	if f.ErrorCode != codes.OK && len(f.ErrorRate) > 0 {
		parts = append(parts, "error-code="+strings.ToLower(f.ErrorCode.String()))
	}
	for _, name := range slices.Sorted(maps.Keys(f.Hang)) {
		if f.Hang[name] {
			parts = append(parts, "hang="+name)
		}
	}
	if f.HangPod != "" {
		parts = append(parts, "hang-pod="+f.HangPod)
	}
	for _, uid := range slices.Sorted(maps.Keys(f.SlowPod)) {
		parts = append(parts, "slow-pod="+uid+":"+f.SlowPod[uid].String())
	}
	if f.StreamDropEvery > 0 {
		parts = append(parts, "drop="+f.StreamDropEvery.String())
	}
	if f.EventsUnimplemented {
		parts = append(parts, "events=unimplemented")
	}
	if f.OversizeLists {
		parts = append(parts, "oversize")
	}
	for _, m := range []struct {
		kind string
		n    int
	}{
		{"nil-metadata", f.Malformed.NilMetadata},
		{"unknown-state", f.Malformed.UnknownState},
		{"duplicate-ids", f.Malformed.DuplicateIDs},
	} {
		if m.n > 0 {
			parts = append(parts, "malformed="+m.kind+":"+strconv.Itoa(m.n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}
