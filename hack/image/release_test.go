// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/plegkit/pleg/internal/testing/helmbin"
)

// TestRelease runs what the release workflow runs after make image, on a
// registry on loopback: the image with its SBOM as a referrer, the chart
// pushed by helm, each signed as cosign signs with a key, and each
// signature checked with the public key alone; another key's check fails.
// The repository is a copy whose chart and changelog name the test's
// version, v9.9.9-test, which the image is stamped with.
func TestRelease(t *testing.T) {
	dir, built := builtImage(t)
	ctx := t.Context()
	helm, err := helmbin.Build(ctx, "../../test/chart", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, t.TempDir())
	}
	src := releaseSource(t, "9.9.9-test")
	key, pub := signingKey(t), ""
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	o := releaseOptions{
		Src: src, Dir: dir, Tag: testVersion, ImageRef: host + "/plegkit/pleg:" + testVersion,
		ChartRepo: "oci://" + host + "/plegkit/charts", Key: key, Helm: []string{helm}, PlainHTTP: true,
		Out: t.TempDir(), Keychain: authn.DefaultKeychain,
	}
	res, err := release(ctx, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	pub = filepath.Join(o.Out, "cosign.pub")
	if res.Image.DigestStr() != built.Digest.String() {
		t.Errorf("released image %s, want make image's index %s", res.Image, built.Digest)
	}
	checkPushed(t, o.ImageRef, built.Digest, readFile(t, filepath.Join(dir, sbomFile)), true)

	chart, err := remote.Image(res.Chart)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := chart.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.Config.MediaType != "application/vnd.cncf.helm.config.v1+json" || len(mf.Layers) != 1 {
		t.Errorf("the chart's manifest: config %s, %d layers; want helm's", mf.Config.MediaType, len(mf.Layers))
	}
	tag, err := name.NewTag(strings.TrimPrefix(o.ChartRepo, "oci://") + "/pleg:9.9.9-test")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := remote.Head(tag); err != nil || d.Digest.String() != res.Chart.DigestStr() {
		t.Errorf("%s is %v (%v), want %s", tag, d, err, res.Chart)
	}

	// Both signed: as cosign verify --key checks, and not by another key.
	other := filepath.Join(t.TempDir(), "other.pub")
	otherKey, err := readPrivateKey(signingKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writePublicKey(otherKey.Public(), filepath.Dir(other)); err != nil {
		t.Fatal(err)
	}
	other = filepath.Join(filepath.Dir(other), "cosign.pub")
	for _, ref := range []name.Digest{res.Image, res.Chart} {
		if n, err := verify(ctx, ref, pub, authn.DefaultKeychain); err != nil || n != 1 {
			t.Errorf("%s: %d signatures, %v", ref, n, err)
		}
		if _, err := verify(ctx, ref, other, authn.DefaultKeychain); err == nil {
			t.Errorf("%s: verified with another key", ref)
		}
	}
	// The command line, as the workflow runs it, checks the image's.
	cmd := exec.CommandContext(ctx, "go", "run", ".", "verify", "-ref", res.Image.String(), "-key", pub)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "signed by") {
		t.Errorf("image verify: %v\n%s", err, out)
	}
	t.Logf("released %s and %s, signed", res.Image, res.Chart)
}

// TestReleaseRefusesWhatIsNoRelease: a tag that is no version, or that
// the chart, the changelog or the image does not name, stops the release
// before anything is pushed.
func TestReleaseRefusesWhatIsNoRelease(t *testing.T) {
	dir, _ := builtImage(t)
	for _, tc := range []struct {
		name, chartVersion, tag, want string
	}{
		{"not a version", "9.9.9-test", "latest", "is no release"},
		{"the chart another", "1.0.0", testVersion, "want 9.9.9-test and " + testVersion},
		{"the image another", "9.9.10", "v9.9.10", "is version \"" + testVersion + "\", not v9.9.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := releaseOptions{Src: releaseSource(t, tc.chartVersion), Dir: dir, Tag: tc.tag, ChartRepo: "oci://127.0.0.1:1/x",
				Key: signingKey(t), Helm: []string{"false"}, Out: t.TempDir()}
			if _, err := release(t.Context(), o, t.Logf); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("release: %v, want an error with %q", err, tc.want)
			}
		})
	}
	src := releaseSource(t, "9.9.9-test")
	if err := os.WriteFile(filepath.Join(src, "CHANGELOG.md"), []byte("## [Unreleased]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := releaseOptions{Src: src, Dir: dir, Tag: testVersion, Key: signingKey(t), Out: t.TempDir()}
	if _, err := release(t.Context(), o, t.Logf); err == nil || !strings.Contains(err.Error(), "CHANGELOG.md has no heading") {
		t.Errorf("release without the changelog's heading: %v", err)
	}
}

// releaseSource is a copy of the repository's chart, of version, with a
// changelog that has its heading.
func releaseSource(t *testing.T, version string) string {
	t.Helper()
	src := t.TempDir()
	if out, err := exec.Command("cp", "-r", "../../charts", src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	chartYAML := filepath.Join(src, "charts", "pleg", "Chart.yaml")
	b := readFile(t, chartYAML)
	b = regexp.MustCompile(`(?m)^version: .*$`).ReplaceAll(b, []byte("version: "+version))
	b = regexp.MustCompile(`(?m)^appVersion: .*$`).ReplaceAll(b, []byte(`appVersion: "v`+version+`"`))
	if err := os.WriteFile(chartYAML, b, 0o644); err != nil {
		t.Fatal(err)
	}
	changelog := "# Changelog\n\n## [Unreleased]\n\n## [" + version + "] - 2026-11-28\n\n### Added\n\n- Everything.\n"
	if err := os.WriteFile(filepath.Join(src, "CHANGELOG.md"), []byte(changelog), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

// signingKey writes a new ECDSA P-256 key, PKCS#8 PEM, as openssl genpkey
// writes one.
func signingKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cosign.key")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
