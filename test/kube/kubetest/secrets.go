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
	"strings"
	"time"
)

// secrets are the files of the API server's certificates and keys.
type secrets struct {
	ca, cert, key string // the CA, and the serving certificate it signed
	saKey         string // the service account signing key
	tokens        string // the static token file: the admin, and opts.Tokens
	// The API server's client certificate towards the kubelets, with
	// opts.Nodes.
	kubeletClientCert, kubeletClientKey string
}

// pemFile is a file of one PEM block.
type pemFile struct {
	path, kind string
	der        []byte
}

// writeSecrets makes a CA, a serving certificate for opts.Address, its
// SANs and localhost, a service account key and the static tokens, into
// dir; with opts.Nodes also a client certificate for the kubelets.
func writeSecrets(dir string, opts Options) (secrets, error) {
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
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(opts.Address)}, opts.SANs...),
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
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
	files := []pemFile{
		{s.ca, "CERTIFICATE", caDER},
		{s.cert, "CERTIFICATE", servingDER},
		{s.key, "PRIVATE KEY", servingKeyDER},
		{s.saKey, "PRIVATE KEY", saKeyDER},
	}
	if opts.Nodes {
		client, err := kubeletClientCert(dir, ca, caKey, now)
		if err != nil {
			return s, err
		}
		s.kubeletClientCert, s.kubeletClientKey = client[0].path, client[1].path
		files = append(files, client...)
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			return s, fmt.Errorf("kubetest: %w", err)
		}
	}
	return s, writeTokens(s.tokens, opts.Tokens)
}

// writeTokens writes the static token file: the admin's, and tokens.
func writeTokens(path string, tokens []Token) error {
	// token,user,uid,"groups"
	lines := AdminToken + `,pleg-test-admin,pleg-test-admin,"system:masters"` + "\n"
	for _, t := range tokens {
		lines += fmt.Sprintf("%s,%s,%s,%q\n", t.Token, t.User, t.User, strings.Join(t.Groups, ","))
	}
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

// kubeletClientCert makes the API server's client certificate towards
// the kubelets, which take one signed by the CA (their
// authentication.x509.clientCAFile) as the API server's.
func kubeletClientCert(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) ([]pemFile, error) {
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &clientKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	clientKeyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		return nil, err
	}
	return []pemFile{
		{filepath.Join(dir, "kubelet-client.crt"), "CERTIFICATE", clientDER},
		{filepath.Join(dir, "kubelet-client.key"), "PRIVATE KEY", clientKeyDER},
	}, nil
}
