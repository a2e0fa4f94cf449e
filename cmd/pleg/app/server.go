// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/plegkit/pleg/api/client"
)

// serverFlags address a pleg daemon and say how to prove who we are to
// it. The names are kubectl's, whose --server they resemble.
type serverFlags struct {
	url  string
	opts client.Options
}

// register adds --server, described by usage, and its TLS and basic-auth
// flags.
func (s *serverFlags) register(f *pflag.FlagSet, usage string) {
	f.StringVar(&s.url, "server", "", usage+": http://host:port, https://host:port or unix:///path")
	f.StringVar(&s.opts.CAFile, "certificate-authority", "", "PEM certificates that sign the daemon's certificate, for "+
		"https://; default the system's")
	f.StringVar(&s.opts.CertFile, "client-certificate", "", "PEM client certificate to present to a daemon that asks "+
		"for one")
	f.StringVar(&s.opts.KeyFile, "client-key", "", "PEM key of --client-certificate")
	f.StringVar(&s.opts.ServerName, "tls-server-name", "", "name to check the daemon's certificate against; default the "+
		"host of --server")
	f.StringVar(&s.opts.Username, "username", "", "user name for the daemon's basic auth")
	f.StringVar(&s.opts.PasswordFile, "password-file", "", "file holding the password of --username, read at each request")
}

// client returns the client of --server, nil without one. A wrong option
// or an unreadable certificate is an error here, before anything starts.
func (s *serverFlags) client() (*client.Client, error) {
	if s.url == "" {
		if s.opts != (client.Options{}) {
			return nil, errors.New("--certificate-authority, --client-certificate, --client-key, --tls-server-name, " +
				"--username and --password-file need --server")
		}
		return nil, nil
	}
	c, err := client.New(s.url, s.opts)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return c, nil
}
