// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/plegkit/pleg/journal/journaltest"
)

func TestOptionsValidate(t *testing.T) {
	valid := Options{Cache: testCache(), Journal: journaltest.Memory(10, 1)}
	tests := []struct {
		name   string
		change func(o *Options)
		want   []string // substrings of the error; none for a valid o
	}{
		{"zero bounds read as defaults", func(*Options) {}, nil},
		{"bounds set", func(o *Options) {
			o.MaxStreams, o.MaxStreamsPerClient, o.MaxFilterValues = 1, 1, 1
			o.WriteTimeout, o.PodsTimeout, o.KeepAlive, o.StreamIdleTimeout = time.Second, time.Second, time.Second, time.Second
		}, nil},
		{"no cache", func(o *Options) { o.Cache = nil }, []string{"no pod cache"}},
		{"no journal", func(o *Options) { o.Journal = nil }, []string{"no journal"}},
		{"negative counts", func(o *Options) {
			o.MaxStreams, o.MaxStreamsPerClient, o.MaxFilterValues = -1, -2, -3
		}, []string{"MaxStreams -1", "MaxStreamsPerClient -2", "MaxFilterValues -3"}},
		{"negative durations", func(o *Options) {
			o.WriteTimeout, o.PodsTimeout, o.KeepAlive, o.StreamIdleTimeout = -1, -2, -3, -4
		}, []string{"WriteTimeout -1ns", "PodsTimeout -2ns", "KeepAlive -3ns", "StreamIdleTimeout -4ns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want an error naming %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v, want it to name %q", err, w)
				}
			}
		})
	}
}

func TestOptionsDefaulted(t *testing.T) {
	tests := []struct {
		name string
		in   Options
		want Options
	}{
		{"zero", Options{}, Options{
			MaxStreams: DefaultMaxStreams, MaxStreamsPerClient: DefaultMaxStreamsPerClient,
			MaxFilterValues: DefaultMaxFilterValues, WriteTimeout: DefaultWriteTimeout, PodsTimeout: DefaultPodsTimeout,
			KeepAlive: DefaultKeepAlive, StreamIdleTimeout: DefaultStreamIdleTimeout,
		}},
		{"set fields kept", Options{
			MaxStreams: 3, MaxStreamsPerClient: 2, MaxFilterValues: 1,
			WriteTimeout: time.Second, PodsTimeout: 2 * time.Second, KeepAlive: 3 * time.Second, StreamIdleTimeout: 4 * time.Second,
		}, Options{
			MaxStreams: 3, MaxStreamsPerClient: 2, MaxFilterValues: 1,
			WriteTimeout: time.Second, PodsTimeout: 2 * time.Second, KeepAlive: 3 * time.Second, StreamIdleTimeout: 4 * time.Second,
		}},
		{"negative read as unset", Options{MaxStreams: -1, WriteTimeout: -time.Second}, Options{
			MaxStreams: DefaultMaxStreams, MaxStreamsPerClient: DefaultMaxStreamsPerClient,
			MaxFilterValues: DefaultMaxFilterValues, WriteTimeout: DefaultWriteTimeout, PodsTimeout: DefaultPodsTimeout,
			KeepAlive: DefaultKeepAlive, StreamIdleTimeout: DefaultStreamIdleTimeout,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.defaulted()
			if got.Logger == nil {
				t.Error("defaulted: no logger")
			}
			got.Logger = nil
			if got.MaxStreams != tt.want.MaxStreams || got.MaxStreamsPerClient != tt.want.MaxStreamsPerClient ||
				got.MaxFilterValues != tt.want.MaxFilterValues || got.WriteTimeout != tt.want.WriteTimeout ||
				got.PodsTimeout != tt.want.PodsTimeout || got.KeepAlive != tt.want.KeepAlive ||
				got.StreamIdleTimeout != tt.want.StreamIdleTimeout {
				t.Errorf("defaulted:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A negative MaxStreams, which Validate refuses, must not make NewServer
// panic: it serves with the default.
func TestNewServerNegativeBounds(t *testing.T) {
	srv := NewServer(Options{Cache: testCache(), Journal: journaltest.Memory(10, 1), MaxStreams: -1, WriteTimeout: -time.Second})
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/livez", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("/livez: %d %q, want 200 ok", rec.Code, rec.Body.String())
	}
	if got := cap(srv.streams); got != DefaultMaxStreams {
		t.Errorf("stream slots: %d, want the default %d", got, DefaultMaxStreams)
	}
}
