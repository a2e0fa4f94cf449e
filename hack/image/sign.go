// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A signature as cosign writes one with a key (`cosign sign --key`), so
// that `cosign verify --key` and the admission controllers that read
// cosign's signatures (sigstore's policy-controller, Kyverno) check it: a
// "simple signing" payload naming the manifest's digest, signed with
// ECDSA P-256 over its SHA-256, the signature in an annotation of the
// payload's layer, in an image tagged sha256-<hex>.sig beside the signed
// one. No transparency log entry: verify with --insecure-ignore-tlog.
const simpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

const (
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	signatureType       = "cosign container image signature"
)

// simpleSigning is the payload a signature signs.
type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]string `json:"optional"`
}

// signatureTag is where cosign keeps the signatures of digest.
func signatureTag(repo name.Repository, digest v1.Hash) name.Tag {
	return repo.Tag(digest.Algorithm + "-" + digest.Hex + ".sig")
}

// signOptions is what `image sign` is asked for.
type signOptions struct {
	Ref      string // REPO@sha256:...: what to sign, by digest
	Key      string // a PEM file: the PKCS#8 (or SEC 1) ECDSA P-256 private key
	Keychain authn.Keychain
}

func parseSignFlags(args []string) (signOptions, error) {
	fs := flag.NewFlagSet("image sign", flag.ContinueOnError)
	o := signOptions{Keychain: authn.DefaultKeychain}
	fs.StringVar(&o.Ref, "ref", "", "the manifest or index to sign, by digest: REPO@sha256:...")
	fs.StringVar(&o.Key, "key", "", "the ECDSA P-256 private key, PEM (PKCS#8 or SEC 1)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("image sign: unexpected arguments %q", fs.Args())
	}
	return o, nil
}

// sign signs o.Ref with o.Key and pushes the signature as cosign does:
// the signature image's layers are the signatures already there and this
// one, unless it is there already.
func sign(ctx context.Context, o signOptions, logf func(string, ...any)) error {
	ref, err := name.NewDigest(o.Ref)
	if err != nil {
		return fmt.Errorf("-ref %q: want REPO@sha256:... (%w)", o.Ref, err)
	}
	key, err := readPrivateKey(o.Key)
	if err != nil {
		return err
	}
	digest, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return err
	}
	payload, err := signingPayload(ref.Context(), digest)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		return err
	}
	layer := static.NewLayer(payload, simpleSigningMediaType)
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain)}
	tag := signatureTag(ref.Context(), digest)
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	if existing, err := remote.Image(tag, ropts...); err == nil {
		base = existing
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       layer,
		Annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, ropts...); err != nil {
		return fmt.Errorf("pushing the signature to %s: %w", tag, err)
	}
	logf("signed %s: signature at %s", ref, tag)
	return nil
}

// signingPayload is the simple signing payload of digest in repo, as
// cosign writes it.
func signingPayload(repo name.Repository, digest v1.Hash) ([]byte, error) {
	var p simpleSigning
	p.Critical.Identity.DockerReference = repo.Name()
	p.Critical.Image.DockerManifestDigest = digest.String()
	p.Critical.Type = signatureType
	return json.Marshal(p)
}

// verify checks that a signature of ref's digest by the public key in
// keyFile is among those at its signature tag, as `cosign verify --key
// --insecure-ignore-tlog` does, and returns how many signatures are there.
func verify(ctx context.Context, ref name.Digest, keyFile string, keychain authn.Keychain) (int, error) {
	pub, err := readPublicKey(keyFile)
	if err != nil {
		return 0, err
	}
	digest, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return 0, err
	}
	img, err := remote.Image(signatureTag(ref.Context(), digest),
		remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain))
	if err != nil {
		return 0, fmt.Errorf("no signature of %s: %w", ref, err)
	}
	mf, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, d := range mf.Layers {
		err := checkSignature(img, d, pub, ref)
		if err == nil {
			return len(mf.Layers), nil
		}
		errs = append(errs, err)
	}
	return len(mf.Layers), fmt.Errorf("no signature of %s by that key among %d: %w",
		ref, len(mf.Layers), errors.Join(errs...))
}

// checkSignature checks one layer of a signature image.
func checkSignature(img v1.Image, d v1.Descriptor, pub *ecdsa.PublicKey, ref name.Digest) error {
	if d.MediaType != simpleSigningMediaType {
		return fmt.Errorf("layer %s: media type %s", d.Digest, d.MediaType)
	}
	sig, err := base64.StdEncoding.DecodeString(d.Annotations[signatureAnnotation])
	if err != nil || len(sig) == 0 {
		return fmt.Errorf("layer %s: no signature annotation (%w)", d.Digest, err)
	}
	l, err := img.LayerByDigest(d.Digest)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	payload, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(payload)
	if !ecdsa.VerifyASN1(pub, sum[:], sig) {
		return fmt.Errorf("layer %s: the signature does not verify", d.Digest)
	}
	var p simpleSigning
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("layer %s: payload: %w", d.Digest, err)
	}
	if p.Critical.Type != signatureType || p.Critical.Image.DockerManifestDigest != ref.DigestStr() ||
		p.Critical.Identity.DockerReference != ref.Context().Name() {
		return fmt.Errorf("layer %s: signs %+v, not %s", d.Digest, p.Critical, ref)
	}
	return nil
}

// readPrivateKey reads an ECDSA P-256 private key, PEM: PKCS#8 ("PRIVATE
// KEY", as `openssl genpkey` writes it) or SEC 1 ("EC PRIVATE KEY").
func readPrivateKey(path string) (*ecdsa.PrivateKey, error) {
	if path == "" {
		return nil, errors.New("no -key: the signing key, an ECDSA P-256 private key in PEM")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	var key crypto.PrivateKey
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s: a %q PEM block; want an unencrypted PRIVATE KEY or EC PRIVATE KEY "+
			"(cosign's own encrypted keys are not read: export the key in PKCS#8)", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: not an ECDSA P-256 key", path)
	}
	return ec, nil
}

// readPublicKey reads an ECDSA P-256 public key, PEM ("PUBLIC KEY", as
// cosign.pub is).
func readPublicKey(path string) (*ecdsa.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s: want a PEM PUBLIC KEY", path)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: not an ECDSA P-256 key", path)
	}
	return ec, nil
}
