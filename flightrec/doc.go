// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package flightrec is pleg's flight recorder: it watches pleg's own CRI
// calls and health, and the runtime's processes, and at the onset of an
// incident (a relist or a call in flight past a fraction of the health
// threshold, the health check failing, the event stream silent while the
// lists change, the node condition on, the runtime or a shim stopped or
// in uninterruptible sleep) keeps what would be gone by the time a person
// looks: pleg's calls in flight, the runtime's goroutine stacks and
// version, its processes' states, wait channels and kernel stacks, the
// host's pressure, memory, hung mounts and kernel log. One JSON file per
// incident in the state directory, read back by `pleg doctor recordings`.
//
// Nothing it does can make the incident worse: every probe runs in a
// goroutine of its own with a deadline and is abandoned, marked timed
// out, if it does not end by then; nothing signals or pauses the runtime
// unless the operator opted in (CRI-O's stack dump).
package flightrec
