// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The SBOM's media types: the SPDX JSON document, and the empty
// configuration an OCI 1.1 artifact manifest carries.
const (
	spdxMediaType  types.MediaType = "application/spdx+json"
	emptyMediaType types.MediaType = "application/vnd.oci.empty.v1+json"
)

// pushOptions is what `image push` is asked for.
type pushOptions struct {
	Dir      string // what `image build` wrote
	Ref      string // where to; empty: Dir/ref
	Keychain authn.Keychain
}

func parsePushFlags(args []string) (pushOptions, error) {
	fs := flag.NewFlagSet("image push", flag.ContinueOnError)
	o := pushOptions{Keychain: authn.DefaultKeychain}
	fs.StringVar(&o.Dir, "dir", "_output/image", "the directory `image build` wrote (IMAGE_DIR)")
	fs.StringVar(&o.Ref, "ref", "", "the reference to push to (default: the directory's ref file)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("image push: unexpected arguments %q", fs.Args())
	}
	return o, nil
}

// push pushes the index of o.Dir's OCI layout to o.Ref, then its SBOM as
// an artifact whose subject is the index: a registry with the OCI 1.1
// referrers API lists it there, and for one without, go-containerregistry
// keeps the referrers tag (sha256-<digest>) up to date.
func push(ctx context.Context, o pushOptions, logf func(string, ...any)) error {
	pushed, err := pushImage(ctx, o, logf)
	if err != nil {
		return err
	}
	fmt.Println(pushed)
	return nil
}

// pushImage is push, returning the index pushed, by digest.
func pushImage(ctx context.Context, o pushOptions, logf func(string, ...any)) (name.Digest, error) {
	if o.Ref == "" {
		b, err := os.ReadFile(filepath.Join(o.Dir, refFile))
		if err != nil {
			return name.Digest{}, fmt.Errorf("no -ref, and no ref file from `make image`: %w", err)
		}
		o.Ref = strings.TrimSpace(string(b))
	}
	ref, err := name.NewTag(o.Ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("-ref %q: %w", o.Ref, err)
	}
	idx, desc, err := readLayoutIndex(filepath.Join(o.Dir, layoutDir))
	if err != nil {
		return name.Digest{}, err
	}
	sbom, err := os.ReadFile(filepath.Join(o.Dir, sbomFile))
	if err != nil {
		return name.Digest{}, err
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain)}

	logf("pushing %s@%s", ref, desc.Digest)
	if err := remote.WriteIndex(ref, idx, ropts...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing the index to %s: %w", ref, err)
	}
	subject := v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}
	created := ""
	if im, err := idx.IndexManifest(); err == nil {
		created = im.Annotations["org.opencontainers.image.created"]
	}
	raw, blobs, err := sbomArtifact(sbom, subject, created)
	if err != nil {
		return name.Digest{}, err
	}
	for _, b := range blobs {
		if err := remote.WriteLayer(ref.Context(), b, ropts...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing the SBOM's blobs: %w", err)
		}
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw.raw))
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Put(ref.Context().Digest(h.String()), raw, ropts...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing the SBOM's manifest: %w", err)
	}
	logf("SBOM %s@%s refers to %s", ref.Context(), h, desc.Digest)
	return ref.Context().Digest(desc.Digest.String()), nil
}

// readLayoutIndex reads the one index that `image build` puts in an OCI
// layout.
func readLayoutIndex(dir string) (v1.ImageIndex, v1.Descriptor, error) {
	l, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, v1.Descriptor{}, fmt.Errorf("reading the OCI layout %s (run make image first): %w", dir, err)
	}
	im, err := l.IndexManifest()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	if len(im.Manifests) != 1 || !im.Manifests[0].MediaType.IsIndex() {
		return nil, v1.Descriptor{}, fmt.Errorf("%s: want one image index in index.json, as make image writes it", dir)
	}
	desc := im.Manifests[0]
	idx, err := l.ImageIndex(desc.Digest)
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	return idx, desc, nil
}

// rawManifest is a manifest to put as it is.
type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mediaType, nil }

// sbomArtifact is the OCI 1.1 artifact manifest of an SPDX document about
// subject, and the blobs it names: the empty configuration and the
// document.
func sbomArtifact(sbom []byte, subject v1.Descriptor, created string) (rawManifest, []v1.Layer, error) {
	if len(sbom) == 0 {
		return rawManifest{}, nil, errors.New("the SBOM is empty")
	}
	cfg := static.NewLayer([]byte("{}"), emptyMediaType)
	doc := static.NewLayer(sbom, spdxMediaType)
	cfgDesc, err := descriptorOf(cfg, nil)
	if err != nil {
		return rawManifest{}, nil, err
	}
	docDesc, err := descriptorOf(doc, map[string]string{"org.opencontainers.image.title": sbomFile})
	if err != nil {
		return rawManifest{}, nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  string(spdxMediaType),
		Config:        cfgDesc,
		Layers:        []v1.Descriptor{docDesc},
		Subject:       &subject,
	}
	if created != "" {
		m.Annotations = map[string]string{"org.opencontainers.image.created": created}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return rawManifest{}, nil, err
	}
	return rawManifest{raw: raw, mediaType: types.OCIManifestSchema1}, []v1.Layer{cfg, doc}, nil
}

func descriptorOf(l v1.Layer, anns map[string]string) (v1.Descriptor, error) {
	d, err := l.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := l.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := l.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Digest: d, Size: size, Annotations: anns}, nil
}
