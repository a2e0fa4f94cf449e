// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"io"
	"strings"
	"testing"
)

// The --otlp-* flags are checked before anything runs, all at once.
func TestOTLPFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--otlp-endpoint", "127.0.0.1:4317", "--otlp-protocol", "thrift"}, `protocol "thrift"`},
		{[]string{"--otlp-endpoint", "127.0.0.1:4317", "--otlp-compression", "zstd"}, `compression "zstd"`},
		{[]string{"--otlp-endpoint", "127.0.0.1:4317", "--otlp-batch-size", "0"}, "--otlp-batch-size 0"},
		{[]string{"--otlp-endpoint", "http://c:4318", "--otlp-protocol", "http/protobuf"}, "plain text"},
		{[]string{"--otlp-endpoint", "c:4317", "--otlp-client-cert", "c.pem"}, "both its certificate and key"},
	} {
		cmd := NewCommand(io.Discard, io.Discard)
		cmd.SetArgs(append([]string{"run", "--simulate"}, tc.args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
