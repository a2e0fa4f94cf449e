// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/plegkit/pleg"
)

// Filter selects events: an event passes when it matches one of the
// values of every field that has values. A gap always passes: a client
// must know it missed something.
type Filter struct {
	// Pods are pod UIDs or names.
	Pods       []string
	Namespaces []string
	Types      []string
}

// Match reports whether ev passes the filter. To match many events, make
// a Matcher once.
func (f Filter) Match(ev *Event) bool { return f.Matcher().Match(ev) }

// Matcher is a Filter made into sets, for matching many events.
type Matcher struct {
	pods, namespaces, types set
}

type set map[string]struct{}

func newSet(values []string) set {
	if len(values) == 0 {
		return nil
	}
	s := make(set, len(values))
	for _, v := range values {
		s[v] = struct{}{}
	}
	return s
}

// has reports whether any of values is in s; an empty s has everything.
func (s set) has(values ...string) bool {
	if s == nil {
		return true
	}
	for _, v := range values {
		if _, ok := s[v]; ok {
			return true
		}
	}
	return false
}

// Matcher returns the filter as sets.
func (f Filter) Matcher() *Matcher {
	return &Matcher{pods: newSet(f.Pods), namespaces: newSet(f.Namespaces), types: newSet(f.Types)}
}

// Match reports whether ev passes the filter.
func (m *Matcher) Match(ev *Event) bool {
	if ev.Type == TypeGap {
		return true
	}
	return m.pods.has(ev.PodUID, ev.PodName) && m.namespaces.has(ev.PodNamespace) && m.types.has(ev.Type)
}

// Query is the filter as /v1/events query parameters.
func (f Filter) Query() url.Values {
	q := url.Values{}
	for _, p := range f.Pods {
		q.Add("pod", p)
	}
	for _, n := range f.Namespaces {
		q.Add("namespace", n)
	}
	for _, t := range f.Types {
		q.Add("type", t)
	}
	return q
}

// Validate checks the filter's values.
func (f Filter) Validate() error {
	for _, t := range f.Types {
		if !slices.Contains(EventTypes(), t) {
			return fmt.Errorf("unknown event type %q (want one of %s)", t, strings.Join(EventTypes(), ", "))
		}
	}
	for _, v := range slices.Concat(f.Pods, f.Namespaces) {
		if v == "" {
			return errors.New("empty pod or namespace filter")
		}
	}
	return nil
}

// values counts the filter's values.
func (f Filter) values() int { return len(f.Pods) + len(f.Namespaces) + len(f.Types) }

// EventTypes are the types a client may filter on.
func EventTypes() []string {
	return []string{string(pleg.ContainerStarted), string(pleg.ContainerDied), string(pleg.ContainerRemoved),
		string(pleg.PodSync), string(pleg.ConditionMet), TypeGap}
}
