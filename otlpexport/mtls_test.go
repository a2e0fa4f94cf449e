// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package otlpexport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A collector that requires a client certificate gets pleg's, from
// --otlp-client-cert and --otlp-client-key, and refuses pleg without one;
// a certificate renewed on disk is presented at the next handshake.
func TestHTTPClientMutualTLS(t *testing.T) {
	ca, caKey := newCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	var mu sync.Mutex
	var seen []string // the client certificates' common names, by request
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].Subject.CommonName)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	dir := t.TempDir()
	serverCA := filepath.Join(dir, "server-ca.pem")
	writeFile(t, serverCA, pemCert(srv.Certificate().Raw))
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	issue := func(cn string) {
		cert, key := newLeaf(t, ca, caKey, cn)
		writeFile(t, certFile, pemCert(cert))
		writeFile(t, keyFile, key)
	}
	issue("pleg-node-1")

	export := func(opts TransportOptions) error {
		c, err := NewClient(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_, _, err = c.Export(context.Background(), request(1))
		return err
	}
	with := TransportOptions{Endpoint: srv.URL, Protocol: ProtocolHTTP, CAFile: serverCA, CertFile: certFile, KeyFile: keyFile}
	if err := export(with); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if err := export(TransportOptions{Endpoint: srv.URL, Protocol: ProtocolHTTP, CAFile: serverCA}); err == nil {
		t.Error("without a client certificate, the collector accepted the export")
	}
	issue("pleg-node-1-renewed")
	if err := export(with); err != nil {
		t.Fatalf("with the renewed client certificate: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "pleg-node-1" || seen[1] != "pleg-node-1-renewed" {
		t.Errorf("the collector saw the client certificates %q, want the first, then the renewed", seen)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// newLeaf returns a client certificate (DER) and its key (PEM).
func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
