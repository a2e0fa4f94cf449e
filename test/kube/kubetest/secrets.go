// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// secrets are the files of the API server's certificates and keys.
type secrets struct {
	ca, cert, key string // the CA, and the serving certificate it signed
	saKey         string // the service account signing key
	tokens        string // the static token file: the admin
}

// writeSecrets makes a CA, a serving certificate for 127.0.0.1 and
// localhost, a service account key and the admin's token, into dir.
func writeSecrets(dir string) (secrets, error) {
	s := secrets{
		ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "apiserver.crt"), key: filepath.Join(dir, "apiserver.key"),
		saKey: filepath.Join(dir, "sa.key"), tokens: filepath.Join(dir, "tokens.csv"),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return s, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pleg kubetest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return s, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return s, err
	}
	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return s, err
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}, ca, &servingKey.PublicKey, caKey)
	if err != nil {
		return s, err
	}
	servingKeyDER, err := x509.MarshalPKCS8PrivateKey(servingKey)
	if err != nil {
		return s, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return s, err
	}
	saKeyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return s, err
	}
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{
		{s.ca, "CERTIFICATE", caDER},
		{s.cert, "CERTIFICATE", servingDER},
		{s.key, "PRIVATE KEY", servingKeyDER},
		{s.saKey, "PRIVATE KEY", saKeyDER},
	} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			return s, fmt.Errorf("kubetest: %w", err)
		}
	}
	// token,user,uid,"groups"
	tokens := AdminToken + `,pleg-test-admin,pleg-test-admin,"system:masters"` + "\n"
	if err := os.WriteFile(s.tokens, []byte(tokens), 0o600); err != nil {
		return s, fmt.Errorf("kubetest: %w", err)
	}
	return s, nil
}
