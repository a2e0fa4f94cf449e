// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pki is a CA and the certificates it signed, written as PEM files.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
	serial int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pleg test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey, p.serial = key, 1
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *pki) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate for name, for a server or a client, and
// returns its certificate and key files.
func (p *pki) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = p.write(t, name+".pem", "CERTIFICATE", der)
	keyFile = p.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	pair, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// A daemon that asks for a client certificate and basic auth, as an
// exporter-toolkit web config can, is read with the CA, the client's
// certificate and the credentials; without any of them it is not.
func TestTLSWithClientCertificateAndBasicAuth(t *testing.T) {
	p := newPKI(t)
	_, _, serverPair := p.issue(t, "server", x509.ExtKeyUsageServerAuth)
	certFile, keyFile, _ := p.issue(t, "client", x509.ExtKeyUsageClientAuth)
	passwordFile := filepath.Join(p.dir, "password")
	if err := os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "prom" || pass != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="pleg"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	full := Options{CAFile: p.caFile, CertFile: certFile, KeyFile: keyFile, Username: "prom", PasswordFile: passwordFile}
	health := func(opts Options) error {
		c, err := New(srv.URL, opts)
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Health(t.Context())
		if err == nil && !h.OK {
			err = errors.New(h.Message)
		}
		return err
	}
	if err := health(full); err != nil {
		t.Fatalf("with CA, client certificate and credentials: %v", err)
	}

	noCA := full
	noCA.CAFile = ""
	if err := health(noCA); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want the daemon's certificate refused", err)
	}
	noCert := full
	noCert.CertFile, noCert.KeyFile = "", ""
	if err := health(noCert); err == nil {
		t.Error("without a client certificate: no error")
	}
	wrong := full
	wrong.PasswordFile, wrong.Password = "", "guess"
	var status *StatusError
	if err := health(wrong); !errors.As(err, &status) || status.Code != http.StatusUnauthorized {
		t.Errorf("with a wrong password: %v, want 401", err)
	}
}
