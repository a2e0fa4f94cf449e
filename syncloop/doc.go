// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package syncloop turns a stream of pod lifecycle events into per-pod
// sync calls, the way the kubelet's syncLoop consumes its PLEG, without
// the kubelet's failure mode under an unhealthy PLEG.
//
// The kubelet checks its runtime health checks (the PLEG's among them)
// before every loop iteration and, while one fails, logs "Skipping pod
// synchronization" and backs off from 100 ms, doubling up to 5 s, without
// reading the PLEG channel. The channel then fills and the PLEG discards
// events, so pods whose containers changed meanwhile may never be synced
// for that change.
//
// A Loop keeps the same health gate and backoff but applies them to
// dispatch only: it always reads its Source and folds what it reads into
// per-pod pending state, bounded by the number of pods. While a check
// fails nothing is dispatched; once all pass, each pending pod is synced
// once, in the order it became pending, with the ContainerDied events
// recorded for it. A pod has at most one sync in flight; events that
// arrive meanwhile make it sync once more afterwards. Different pods sync
// concurrently.
package syncloop
