// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"
)

// releaseOptions is what `image release` is asked for: the steps of
// .github/workflows/release.yml after `make image`.
type releaseOptions struct {
	Src       string   // the repository's root: Chart.yaml and CHANGELOG.md are read there
	Dir       string   // what `image build` wrote (IMAGE_DIR)
	Tag       string   // the release: vMAJOR.MINOR.PATCH
	ImageRef  string   // where the image goes; empty: Dir/ref
	ChartRepo string   // where the chart goes: oci://HOST/PATH
	Key       string   // the signing key (sign.go)
	Helm      []string // the helm command
	PlainHTTP bool     // the registries speak HTTP (one on loopback)
	Out       string   // where the chart's package is written
	Keychain  authn.Keychain
}

// releaseResult is what a release pushed.
type releaseResult struct {
	Image, Chart name.Digest
}

func parseReleaseFlags(args []string) (releaseOptions, error) {
	fs := flag.NewFlagSet("image release", flag.ContinueOnError)
	o := releaseOptions{Keychain: authn.DefaultKeychain}
	fs.StringVar(&o.Src, "src", "../..", "the repository's root")
	fs.StringVar(&o.Dir, "dir", "_output/image", "the directory `image build` wrote (IMAGE_DIR)")
	fs.StringVar(&o.Tag, "tag", "", "the release's tag, vMAJOR.MINOR.PATCH")
	fs.StringVar(&o.ImageRef, "image", "", "where to push the image (default: the directory's ref file)")
	fs.StringVar(&o.ChartRepo, "chart-repo", "oci://ghcr.io/plegkit/charts", "where to push the chart")
	fs.StringVar(&o.Key, "key", "", "the signing key: ECDSA P-256, PEM (PKCS#8 or SEC 1)")
	helm := fs.String("helm", "helm", "the helm command (words split at spaces)")
	fs.BoolVar(&o.PlainHTTP, "plain-http", false, "the registries speak plain HTTP (a registry on loopback)")
	fs.StringVar(&o.Out, "out", "_output/chart", "where to write the chart's package")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("image release: unexpected arguments %q", fs.Args())
	}
	o.Helm = strings.Fields(*helm)
	return o, nil
}

// release checks that the tag is a release the repository names (the
// chart's version and appVersion, the changelog's heading, the image's
// stamp), pushes the image with its SBOM attached and signs it, then
// packages and pushes the chart and signs it, and checks both signatures.
func release(ctx context.Context, o releaseOptions, logf func(string, ...any)) (releaseResult, error) {
	var res releaseResult
	if err := checkRelease(o); err != nil {
		return res, err
	}
	key, err := readPrivateKey(o.Key)
	if err != nil {
		return res, err
	}
	pubFile, err := writePublicKey(key.Public(), o.Out)
	if err != nil {
		return res, err
	}
	res.Image, err = pushImage(ctx, pushOptions{Dir: o.Dir, Ref: o.ImageRef, Keychain: o.Keychain}, logf)
	if err != nil {
		return res, err
	}
	if err := sign(ctx, signOptions{Ref: res.Image.String(), Key: o.Key, Keychain: o.Keychain}, logf); err != nil {
		return res, err
	}

	version := strings.TrimPrefix(o.Tag, "v")
	if _, err := runHelm(ctx, o, "package", filepath.Join(o.Src, "charts", "pleg"), "--destination", o.Out); err != nil {
		return res, err
	}
	pkg := filepath.Join(o.Out, "pleg-"+version+".tgz")
	args := []string{"push", pkg, o.ChartRepo}
	if o.PlainHTTP {
		args = append(args, "--plain-http")
	}
	out, err := runHelm(ctx, o, args...)
	if err != nil {
		return res, err
	}
	m := regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})\s*$`).FindStringSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("helm push named no digest:\n%s", out)
	}
	res.Chart, err = name.NewDigest(strings.TrimPrefix(o.ChartRepo, "oci://") + "/pleg@" + m[1])
	if err != nil {
		return res, err
	}
	logf("chart %s pushed", res.Chart)
	if err := sign(ctx, signOptions{Ref: res.Chart.String(), Key: o.Key, Keychain: o.Keychain}, logf); err != nil {
		return res, err
	}
	for _, ref := range []name.Digest{res.Image, res.Chart} {
		if _, err := verify(ctx, ref, pubFile, o.Keychain); err != nil {
			return res, fmt.Errorf("the signature just pushed: %w", err)
		}
	}
	logf("release %s: image %s, chart %s, signed (public key %s)", o.Tag, res.Image, res.Chart, pubFile)
	return res, nil
}

var releaseTag = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// checkRelease checks that o.Tag is a release the repository and the
// image name.
func checkRelease(o releaseOptions) error {
	if !releaseTag.MatchString(o.Tag) {
		return fmt.Errorf("tag %q is no release (vMAJOR.MINOR.PATCH)", o.Tag)
	}
	version := strings.TrimPrefix(o.Tag, "v")
	b, err := os.ReadFile(filepath.Join(o.Src, "charts", "pleg", "Chart.yaml"))
	if err != nil {
		return err
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return fmt.Errorf("charts/pleg/Chart.yaml: %w", err)
	}
	if chart.Version != version || chart.AppVersion != o.Tag {
		return fmt.Errorf("charts/pleg/Chart.yaml has version %s and appVersion %s: want %s and %s",
			chart.Version, chart.AppVersion, version, o.Tag)
	}
	changelog, err := os.ReadFile(filepath.Join(o.Src, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	heading := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(version) + `\] - \d{4}-\d{2}-\d{2}$`)
	if !heading.Match(changelog) {
		return fmt.Errorf("CHANGELOG.md has no heading \"## [%s] - YYYY-MM-DD\"", version)
	}
	idx, _, err := readLayoutIndex(filepath.Join(o.Dir, layoutDir))
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if got := im.Annotations["org.opencontainers.image.version"]; got != o.Tag {
		return fmt.Errorf("the image in %s is version %q, not %s: make image VERSION=%s", o.Dir, got, o.Tag, o.Tag)
	}
	return nil
}

// runHelm runs helm and returns what it printed.
func runHelm(ctx context.Context, o releaseOptions, args ...string) (string, error) {
	if len(o.Helm) == 0 {
		return "", errors.New("no helm command")
	}
	cmd := exec.CommandContext(ctx, o.Helm[0], append(o.Helm[1:], args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// writePublicKey writes the public key of the signing key beside the
// chart's package, as cosign.pub, for who checks the signatures.
func writePublicKey(pub any, dir string) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cosign.pub")
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}
