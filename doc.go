// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pleg is a pod lifecycle event generator for CRI container
// runtimes: the kubelet's PLEG as a library.
//
// A Generator lists the runtime's pod sandboxes and containers every
// second, compares each pod with what it saw before, inspects the pods
// that changed into a pod status cache and delivers one Event per
// container state change: ContainerStarted, ContainerDied,
// ContainerRemoved, plus PodSync after a requested re-inspection and
// ConditionMet when a watch condition holds. Healthy reports, with the
// kubelet's wording, whether relisting keeps up.
//
// It follows the kubelet where the kubelet is right: the same transition
// table, sandboxes tracked like containers, records advanced only after a
// successful inspection, failed pods inspected again, the cache's global
// time stamped after every pod is written, the same defaults and the same
// metric names. It departs from it where the kubelet is known to be wrong:
//
//   - pods are inspected in parallel (InspectConcurrency; 1 is the
//     kubelet's order), each within a deadline, so one stuck pod cannot
//     stall the relist and take the node NotReady;
//   - Subscribe gives any number of consumers a stream that loses nothing:
//     a consumer that falls behind gets each container's pending life
//     whole, in memory bounded by pods and containers; Watch keeps the
//     kubelet's dropping channel for compatibility;
//   - per-pod relist requests coalesce instead of being dropped past 200;
//   - malformed runtime data is logged once and counted, never a panic;
//   - kubelet_pleg_last_seen_seconds moves with every relist, not only
//     when someone asks for health; Status tells how relisting fares
//     (failing pods, a runtime that is down, a relist in flight);
//   - where the runtime has a container event stream (ModeAuto), each
//     event's payload is applied at once by the one goroutine that writes
//     the cache, never moving a pod back, and a relist of the pod confirms
//     it; global relists slow to a safety net while the stream holds, and
//     the stream is retried forever, not given up after 5 failures.
//
// The runtime is anything that implements runtime.Runtime, a subset of the
// CRI RuntimeService; runtime/fakeruntime is an in-memory one for tests.
// The cache is a podcache.Cache; syncloop consumes a subscription the way
// the kubelet's sync loop consumes its PLEG.
package pleg
