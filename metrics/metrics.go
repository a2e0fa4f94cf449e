// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metrics defines the Prometheus collectors of the generator.
//
// Metrics the kubelet also exports keep the kubelet's names, types, help
// texts, labels and buckets, so existing dashboards and alerts (for example
// kubernetes-mixin's KubeletPlegDurationHigh) work unchanged once their job
// selector points at pleg. Metrics of our own carry the pleg_ prefix.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the container_state label of kubelet_running_containers: CRI's
// container states, lower-cased as the kubelet spells them.
const (
	ContainerStateCreated = "created"
	ContainerStateRunning = "running"
	ContainerStateExited  = "exited"
	ContainerStateUnknown = "unknown"
)

// Reasons of pleg_pod_inspection_failures_total.
const (
	InspectionDeadline = "deadline"
	InspectionError    = "error"
)

// PLEG holds the collectors of one generator.
type PLEG struct {
	// Kubelet's.
	RelistDuration    prometheus.Histogram
	RelistInterval    prometheus.Histogram
	DiscardEvents     prometheus.Counter
	LastSeen          prometheus.Gauge
	PodRelistDuration prometheus.Histogram
	RunningPods       prometheus.Gauge
	RunningContainers *prometheus.GaugeVec

	// Ours.
	// LongRelistDuration is pleg_relist_duration_seconds: the observations
	// of RelistDuration, with buckets up to 10 minutes. Observe both with
	// ObserveRelist.
	LongRelistDuration prometheus.Histogram
	RelistInFlight     prometheus.Gauge
	RelistStarted      prometheus.Gauge
	InspectionDuration prometheus.Histogram
	InspectionFailures *prometheus.CounterVec
	CoalescedEvents    prometheus.Counter
	InvalidItems       *prometheus.CounterVec
	Events             *prometheus.CounterVec

	// Evented mode: the kubelet's, then ours.
	EventedConnectionSuccess prometheus.Counter
	EventedConnectionErrors  prometheus.Counter
	EventedLatency           prometheus.Histogram
	StreamConnected          prometheus.Gauge
	StreamReconnects         prometheus.Counter
	Hints                    *prometheus.CounterVec
	HintsCoalesced           prometheus.Counter
	PodRelists               prometheus.Counter
	ShortLivedEvents         prometheus.Counter
	StoreFailures            prometheus.Counter
	EventsDropped            prometheus.Counter
	PayloadsApplied          prometheus.Counter
	PayloadFallbacks         *prometheus.CounterVec
	RemovalWatchRelists      prometheus.Counter
	InspectionRetries        prometheus.Counter
	Mode                     *prometheus.GaugeVec
}

// NewPLEG creates the collectors and registers them on reg. A nil reg
// leaves them unregistered, which is what tests and embedders without
// Prometheus want; registering a second generator on the same reg fails.
func NewPLEG(reg prometheus.Registerer) (*PLEG, error) {
	m := &PLEG{}
	m.newKubeletCollectors()
	m.newPLEGCollectors()
	m.newEventedCollectors()
	m.initLabels()
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range m.collectors() {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// newKubeletCollectors creates the metrics the kubelet's PLEG exports, with
// its names, help texts and buckets.
func (m *PLEG) newKubeletCollectors() {
	m.RelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kubelet_pleg_relist_duration_seconds",
		Help:    "Duration in seconds for relisting pods in PLEG.",
		Buckets: prometheus.DefBuckets,
	})
	m.RelistInterval = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kubelet_pleg_relist_interval_seconds",
		Help:    "Interval in seconds between relisting in PLEG.",
		Buckets: prometheus.DefBuckets,
	})
	m.DiscardEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_pleg_discard_events",
		Help: "The number of discard events in PLEG.",
	})
	m.LastSeen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelet_pleg_last_seen_seconds",
		Help: "Timestamp in seconds when PLEG was last seen active.",
	})
	m.PodRelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kubelet_pleg_pod_relist_duration_seconds",
		Help:    "Duration in seconds for relisting a single pod in PLEG.",
		Buckets: prometheus.DefBuckets,
	})
	m.RunningPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelet_running_pods",
		Help: "Number of pods that have a running pod sandbox",
	})
	m.RunningContainers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelet_running_containers",
		Help: "Number of containers currently running",
	}, []string{"container_state"})
}

// LongRelistBuckets are pleg_relist_duration_seconds' buckets: the
// kubelet's DefBuckets, which end at 10 s, then up to 10 minutes. A relist
// past the health threshold (3 minutes) lands in +Inf of the kubelet's
// histogram, where no quantile can tell 11 s from 5 minutes; dashboards
// and alerts of relists that approach the threshold read this one.
var LongRelistBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180, 300, 600}

// ObserveRelist records the duration of a global relist in the kubelet's
// histogram and in pleg_relist_duration_seconds.
func (m *PLEG) ObserveRelist(seconds float64) {
	m.RelistDuration.Observe(seconds)
	m.LongRelistDuration.Observe(seconds)
}

// newPLEGCollectors creates pleg's own metrics of the relist and its events.
func (m *PLEG) newPLEGCollectors() {
	m.LongRelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "pleg_relist_duration_seconds",
		Help: "Duration in seconds of a global relist, as kubelet_pleg_relist_duration_seconds, with buckets up to " +
			"10 minutes: past the health threshold too.",
		Buckets: LongRelistBuckets,
		// A native histogram as well, for a Prometheus that scrapes them:
		// about 10% resolution at any duration, for one observation a
		// relist, and bounded in size.
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	})
	m.RelistInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pleg_relist_in_flight",
		Help: "1 while a global relist is running, else 0. With pleg_relist_started_timestamp_seconds it shows a relist " +
			"that hangs, which kubelet_pleg_relist_duration_seconds only records once it returns.",
	})
	m.RelistStarted = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pleg_relist_started_timestamp_seconds",
		Help: "Unix time at which the running or the last global relist started.",
	})
	m.InspectionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "pleg_pod_inspection_duration_seconds",
		Help:    "Duration in seconds of inspecting one pod: the status calls for its sandboxes and containers.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
	})
	m.InspectionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pleg_pod_inspection_failures_total",
		Help: "Pod inspections that failed, by reason: deadline (the per-pod inspection deadline passed) or error. A " +
			"failed pod is inspected again at the next relist.",
	}, []string{"reason"})
	m.CoalescedEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_coalesced_events_total",
		Help: "Events a lagging subscriber did not receive separately because a later event of the same container " +
			"superseded them.",
	})
	m.Events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pleg_events_total",
		Help: "Pod lifecycle events the generator produced, by type, before any subscriber's coalescing.",
	}, []string{"type"})
	m.InvalidItems = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pleg_invalid_runtime_items_total",
		Help: "Malformed items in the runtime's lists, counted once per item and reason.",
	}, []string{"reason"})
}

// newEventedCollectors creates the metrics of evented mode: the kubelet's
// evented PLEG metrics, then pleg's own.
func (m *PLEG) newEventedCollectors() {
	m.EventedConnectionSuccess = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_evented_pleg_connection_success_count",
		Help: "The number of times a streaming client was obtained to receive CRI Events.",
	})
	m.EventedConnectionErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_evented_pleg_connection_error_count",
		Help: "The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
	})
	m.EventedLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kubelet_evented_pleg_connection_latency_seconds",
		Help:    "The latency of streaming connection with the CRI runtime, measured in seconds.",
		Buckets: prometheus.DefBuckets,
	})
	m.StreamConnected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pleg_evented_stream_connected",
		Help: "1 while the CRI container event stream is connected, else 0.",
	})
	m.StreamReconnects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_evented_stream_reconnects_total",
		Help: "Attempts to open the CRI container event stream again after it ended or failed.",
	})
	m.Hints = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pleg_evented_hints_total",
		Help: "CRI container events received, each a hint to relist its pod, by event type; replayed events are the " +
			"backlog a runtime sends a new subscriber.",
	}, []string{"type"})
	m.HintsCoalesced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_evented_hints_coalesced_total",
		Help: "Hints that found a relist of their pod already pending and joined it.",
	})
	m.PodRelists = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_pod_relists_total",
		Help: "Relists of a single pod, on request or on a hint.",
	})
	m.ShortLivedEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_evented_short_lived_events_total",
		Help: "Events of containers the event stream reported but that were gone before a relist could see them.",
	})
	m.StoreFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_store_commit_failures_total",
		Help: "Changes the generator could not keep in its store before delivering them; a restart may report them again.",
	})
	m.EventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_evented_events_dropped_total",
		Help: "CRI container events dropped because too many waited to be handled; a global relist then finds what they " +
			"said.",
	})
	m.PayloadsApplied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_evented_payloads_applied_total",
		Help: "CRI container events whose payload (the pod's statuses as the runtime sent them) was applied at once, " +
			"before the relist of the pod that confirms it.",
	})
	m.PayloadFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pleg_evented_payload_fallbacks_total",
		Help: "CRI container events whose payload could not be applied at once, by reason; they took the relist path alone.",
	}, []string{"reason"})
	m.RemovalWatchRelists = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_evented_removal_watch_relists_total",
		Help: "Relists of pods asked for by the removal watch: a sandbox or an exited container was removed and the event " +
			"stream did not tell it (CRI-O when a pod is removed).",
	})
	m.InspectionRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pleg_evented_inspection_retries_total",
		Help: "Relists of pods asked for again, after a backoff, because their relist or inspection failed while the event " +
			"stream drove.",
	})
	m.Mode = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pleg_mode",
		Help: "1 for the mode in force: evented while the CRI event stream holds, else generic (relisting alone).",
	}, []string{"mode"})
}

// initLabels makes every label value known in advance appear at 0 before
// its first event.
func (m *PLEG) initLabels() {
	for _, t := range []string{"created", "started", "stopped", "deleted", "replayed"} {
		m.Hints.WithLabelValues(t)
	}
	m.SetRunningContainers(0, 0, 0, 0)
	for _, r := range []string{InspectionDeadline, InspectionError} {
		m.InspectionFailures.WithLabelValues(r)
	}
}

// SetRunningContainers sets kubelet_running_containers for every state at
// once. The kubelet sets only the states it counted, so a state that drops
// to zero keeps its last value there; here it reads 0.
func (m *PLEG) SetRunningContainers(created, running, exited, unknown int) {
	m.RunningContainers.WithLabelValues(ContainerStateCreated).Set(float64(created))
	m.RunningContainers.WithLabelValues(ContainerStateRunning).Set(float64(running))
	m.RunningContainers.WithLabelValues(ContainerStateExited).Set(float64(exited))
	m.RunningContainers.WithLabelValues(ContainerStateUnknown).Set(float64(unknown))
}

func (m *PLEG) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.RelistDuration, m.RelistInterval, m.DiscardEvents, m.LastSeen, m.PodRelistDuration,
		m.RunningPods, m.RunningContainers,
		m.LongRelistDuration, m.RelistInFlight, m.RelistStarted, m.InspectionDuration, m.InspectionFailures,
		m.CoalescedEvents, m.InvalidItems, m.Events,
		m.EventedConnectionSuccess, m.EventedConnectionErrors, m.EventedLatency,
		m.StreamConnected, m.StreamReconnects, m.Hints, m.HintsCoalesced, m.PodRelists, m.ShortLivedEvents, m.EventsDropped,
		m.StoreFailures, m.PayloadsApplied, m.PayloadFallbacks, m.RemovalWatchRelists, m.InspectionRetries, m.Mode,
	}
}
