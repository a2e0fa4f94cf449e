// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	spdxjson "github.com/spdx/tools-golang/json"
)

// The build the tests check: both platforms of the image, with a version
// and a time no real build has.
var (
	testCreated  = time.Unix(1700000000, 0).UTC()
	testVersion  = "v9.9.9-test"
	testRevision = "0123abcd"
)

func testOptions(t *testing.T, out string) buildOptions {
	t.Helper()
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	platforms, err := parsePlatforms("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	return buildOptions{
		Src: src, Out: out, Repo: "ghcr.io/plegkit/pleg", Tag: "test",
		Platforms: platforms, Version: testVersion, Revision: testRevision,
		Created: testCreated, Go: "go",
	}
}

// built is the image the tests share: cross-compiling pleg for two
// platforms takes minutes on a cold cache.
var built struct {
	once sync.Once
	dir  string
	res  buildResult
	err  error
}

func builtImage(t *testing.T) (string, buildResult) {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "pleg-image-test-")
		if built.err == nil {
			built.res, built.err = build(context.Background(), testOptions(t, built.dir), t.Logf)
		}
	})
	if built.err != nil {
		t.Fatalf("build: %v", built.err)
	}
	return built.dir, built.res
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// TestBuildIsReproducible builds the image a second time, elsewhere: the
// same digest, and the same bytes in every file.
func TestBuildIsReproducible(t *testing.T) {
	first, res := builtImage(t)
	second := t.TempDir()
	res2, err := build(context.Background(), testOptions(t, second), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Digest != res.Digest {
		t.Errorf("digests differ: %s, then %s", res.Digest, res2.Digest)
	}
	for _, f := range []string{archiveFile, sbomFile, digestFile, refFile, "oci/index.json"} {
		a, b := readFile(t, filepath.Join(first, f)), readFile(t, filepath.Join(second, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds", f)
		}
	}
	if got := strings.TrimSpace(string(readFile(t, filepath.Join(first, digestFile)))); got != res.Digest.String() {
		t.Errorf("digest file %q, want %s", got, res.Digest)
	}
	if got := string(readFile(t, filepath.Join(first, refFile))); got != "ghcr.io/plegkit/pleg:test\n" {
		t.Errorf("ref file %q", got)
	}
}

// TestImage reads the layout back: the index, one image per platform with
// its configuration, labels and one layer holding a static pleg stamped
// with the version.
func TestImage(t *testing.T) {
	dir, res := builtImage(t)
	lp, err := layout.FromPath(filepath.Join(dir, layoutDir))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topm.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want the image's index alone", len(topm.Manifests))
	}
	d := topm.Manifests[0]
	wantNames := map[string]string{containerdNameAnnotation: "ghcr.io/plegkit/pleg:test", refNameAnnotation: "test"}
	if d.Digest != res.Digest || d.MediaType != types.OCIImageIndex || !maps.Equal(d.Annotations, wantNames) {
		t.Errorf("index.json: %+v, want the index %s named by %v", d, res.Digest, wantNames)
	}

	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	labels := testOptions(t, "").annotations()
	if labels["org.opencontainers.image.created"] != "2023-11-14T22:13:20Z" || labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("labels %v", labels)
	}
	if !maps.Equal(im.Annotations, labels) {
		t.Errorf("index annotations %v, want %v", im.Annotations, labels)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("index platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
	for _, m := range im.Manifests {
		t.Run(m.Platform.Architecture, func(t *testing.T) {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img, m.Platform.Architecture, labels)
		})
	}
}

func checkImage(t *testing.T, img v1.Image, arch string, labels map[string]string) {
	t.Helper()
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.MediaType != types.OCIManifestSchema1 || mf.Config.MediaType != types.OCIConfigJSON || !maps.Equal(mf.Annotations, labels) {
		t.Errorf("manifest: media type %s, config %s, annotations %v", mf.MediaType, mf.Config.MediaType, mf.Annotations)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != arch || !cf.Created.Equal(testCreated) {
		t.Errorf("config: %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/pleg"}) || !slices.Equal(c.Cmd, []string{"run"}) {
		t.Errorf("entrypoint %q, cmd %q: want [/pleg] [run]", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["9847/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want 9847/tcp", c.ExposedPorts)
	}
	if !maps.Equal(c.Labels, labels) {
		t.Errorf("labels %v, want %v", c.Labels, labels)
	}
	for _, h := range cf.History {
		if !h.Created.Equal(testCreated) {
			t.Errorf("history entry created %v, want %v", h.Created, testCreated)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v: want one", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "pleg" || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 ||
		hdr.Uname != "" || hdr.Gname != "" || !hdr.ModTime.Equal(testCreated) {
		t.Errorf("layer entry %+v: want pleg, 0755, root, at %v, no names", hdr, testCreated)
	}
	exe, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("the layer holds more than /pleg (%v)", err)
	}
	checkBinary(t, exe, arch)
}

// checkBinary checks that pleg is a static ELF for arch stamped with the
// version, and runs it where it can.
func checkBinary(t *testing.T, exe []byte, arch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatal(err)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != machine {
		t.Errorf("ELF machine %v, want %v", f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("ELF has a %v program header: not static", p.Type)
		}
	}
	// Stripped (-s -w): no symbol table, no DWARF; the build information
	// below stays.
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("ELF section %s: the binary is not stripped", s.Name)
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(exe))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, st := range bi.Settings {
		settings[st.Key] = st.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOOS"] != "linux" || settings["GOARCH"] != arch {
		t.Errorf("build settings %v: want CGO_ENABLED=0, -trimpath, linux/%s", settings, arch)
	}
	// With -trimpath, Go leaves -ldflags out of the build information:
	// the strings -X stamped are in the binary's data.
	for _, s := range []string{testVersion, testRevision} {
		if !bytes.Contains(exe, []byte(s)) {
			t.Errorf("%q is not stamped into the binary", s)
		}
	}
	if bi.Path != "github.com/plegkit/pleg/cmd/pleg" {
		t.Errorf("main package %s", bi.Path)
	}
	if arch != runtime.GOARCH {
		return
	}
	bin := filepath.Join(t.TempDir(), "pleg")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	// It fails to reach a runtime, after printing its version.
	out, _ := exec.Command(bin, "version", "-r", "unix:///nonexistent.sock", "-t", "1s").Output()
	if first, _, _ := strings.Cut(string(out), "\n"); !strings.HasPrefix(first, "pleg:    "+testVersion+", revision "+testRevision+" (go") {
		t.Errorf("pleg version: %q, want the version and revision the build stamped", first)
	}
}

// TestArchive checks pleg.tar, what `ctr images import` reads: the
// layout's files, in order, with fixed times and owners.
func TestArchive(t *testing.T) {
	dir, res := builtImage(t)
	f, err := os.Open(filepath.Join(dir, archiveFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	var names []string
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if !hdr.ModTime.Equal(testCreated) || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: %v, uid %d gid %d %q %q: want %v, root, no names", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, testCreated)
		}
		if hdr.Typeflag == tar.TypeReg {
			if files[hdr.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("entries not in order: %v", names)
	}
	if !bytes.Equal(files["index.json"], readFile(t, filepath.Join(dir, layoutDir, "index.json"))) {
		t.Error("index.json differs from the layout's")
	}
	if _, ok := files["oci-layout"]; !ok {
		t.Error("no oci-layout")
	}
	blobs, err := filepath.Glob(filepath.Join(dir, layoutDir, "blobs", "sha256", "*"))
	if err != nil || len(blobs) == 0 {
		t.Fatalf("layout blobs: %v %v", blobs, err)
	}
	for _, b := range blobs {
		if !bytes.Equal(files["blobs/sha256/"+filepath.Base(b)], readFile(t, b)) {
			t.Errorf("blob %s missing or different", filepath.Base(b))
		}
	}
	if _, ok := files["blobs/sha256/"+res.Digest.Hex]; !ok {
		t.Errorf("no blob for the index %s", res.Digest)
	}
}

// TestSBOM parses the SBOM: the image by digest, pleg at its version, the
// standard library, the modules pleg links with their versions from
// go.mod, go.sum's hashes and purls.
func TestSBOM(t *testing.T) {
	dir, res := builtImage(t)
	f, err := os.Open(filepath.Join(dir, sbomFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := spdxjson.Read(f)
	if err != nil {
		t.Fatalf("SBOM does not parse as SPDX: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || !strings.Contains(doc.DocumentNamespace, res.Digest.Hex) || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("document %s, namespace %s, created %s", doc.SPDXVersion, doc.DocumentNamespace, doc.CreationInfo.Created)
	}
	criAPI := regexp.MustCompile(`(?m)^\s+k8s\.io/cri-api (v\S+)`).FindStringSubmatch(string(readFile(t, "../../go.mod")))
	if criAPI == nil {
		t.Fatal("go.mod requires no k8s.io/cri-api")
	}
	want := map[string]struct{ version, purl string }{
		"ghcr.io/plegkit/pleg":    {"test", "pkg:oci/pleg@" + res.Digest.String() + "?repository_url=ghcr.io%2Fplegkit%2Fpleg&tag=test"},
		"github.com/plegkit/pleg": {testVersion, "pkg:golang/github.com/plegkit/pleg@" + testVersion},
		"stdlib":                  {runtime.Version(), "pkg:golang/stdlib@" + runtime.Version()},
		"k8s.io/cri-api":          {criAPI[1], "pkg:golang/k8s.io/cri-api@" + criAPI[1]},
		"google.golang.org/grpc":  {"", ""},
	}
	withSum := 0
	for _, p := range doc.Packages {
		if strings.HasPrefix(p.PackageExternalReferences[0].Locator, "pkg:golang/") && len(p.PackageChecksums) == 1 {
			if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(p.PackageChecksums[0].Value) {
				t.Errorf("%s: checksum %q, want SHA-256 hex", p.PackageName, p.PackageChecksums[0].Value)
			}
			withSum++
		}
		w, ok := want[p.PackageName]
		if !ok {
			continue
		}
		delete(want, p.PackageName)
		if w.version == "" {
			continue
		}
		if p.PackageVersion != w.version || p.PackageExternalReferences[0].Locator != w.purl {
			t.Errorf("%s: version %s, purl %s; want %s, %s", p.PackageName, p.PackageVersion, p.PackageExternalReferences[0].Locator, w.version, w.purl)
		}
		if p.PackageName == "k8s.io/cri-api" && len(p.PackageChecksums) != 1 {
			t.Errorf("k8s.io/cri-api: no checksum from go.sum")
		}
		if p.PackageName == "ghcr.io/plegkit/pleg" && (len(p.PackageChecksums) != 1 || p.PackageChecksums[0].Value != res.Digest.Hex) {
			t.Errorf("the image's checksum %v, want its index digest", p.PackageChecksums)
		}
	}
	if len(want) > 0 {
		t.Errorf("SBOM lacks %v", slices.Collect(maps.Keys(want)))
	}
	if withSum < 20 {
		t.Errorf("%d modules with a checksum: want those of go.sum", withSum)
	}
}

// TestPush pushes the built image to a registry on loopback, with and
// without the referrers API: the index arrives whole, and the SBOM is
// found among its referrers.
func TestPush(t *testing.T) {
	dir, res := builtImage(t)
	for _, referrersAPI := range []bool{true, false} {
		name := map[bool]string{true: "referrers-api", false: "referrers-tag"}[referrersAPI]
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrersAPI), registry.Logger(log.New(io.Discard, "", 0))))
			defer srv.Close()
			ref := strings.TrimPrefix(srv.URL, "http://") + "/plegkit/pleg:test"
			err := push(context.Background(), pushOptions{Dir: dir, Ref: ref, Keychain: authn.DefaultKeychain}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			checkPushed(t, ref, res.Digest, readFile(t, filepath.Join(dir, sbomFile)), referrersAPI)
		})
	}
}

func checkPushed(t *testing.T, ref string, digest v1.Hash, sbom []byte, referrersAPI bool) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := idx.Digest(); got != digest {
		t.Errorf("pushed index %s, want %s", got, digest)
	}
	referrers, err := remote.Referrers(tag.Context().Digest(digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	rm, err := referrers.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 {
		t.Fatalf("referrers of the index: %+v, want the SBOM", rm.Manifests)
	}
	// go-containerregistry's test registry answers the referrers API
	// with the configuration's media type as the artifact type, not the
	// manifest's artifactType (pkg/registry's handleReferrers); the
	// referrers tag that push keeps has it right.
	if !referrersAPI && rm.Manifests[0].ArtifactType != string(spdxMediaType) {
		t.Errorf("referrer's artifact type %q, want %s", rm.Manifests[0].ArtifactType, spdxMediaType)
	}
	art, err := remote.Image(tag.Context().Digest(rm.Manifests[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := art.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.ArtifactType != string(spdxMediaType) || mf.Config.MediaType != emptyMediaType || mf.Subject == nil ||
		mf.Subject.Digest != digest || len(mf.Layers) != 1 || mf.Layers[0].MediaType != spdxMediaType {
		t.Fatalf("SBOM manifest: artifact type %s, config %s, subject %v, layers %v", mf.ArtifactType, mf.Config.MediaType, mf.Subject, mf.Layers)
	}
	l, err := remote.Layer(tag.Context().Digest(mf.Layers[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sbom) {
		t.Error("the pushed SBOM differs from sbom.spdx.json")
	}
}

// TestBadInput: what make image is given wrong fails, saying what.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no tag", []string{"-tag="}, "no tag"},
		{"bad tag", []string{"-tag=v1:2"}, "no image reference"},
		{"repo without registry", []string{"-repo=pleg"}, "no image reference"},
		{"no version", []string{"-version="}, "no version"},
		{"no revision", []string{"-revision="}, "no revision"},
		{"variant", []string{"-platforms=linux/arm64/v8"}, "want linux/ARCH"},
		{"darwin", []string{"-platforms=darwin/arm64"}, "want linux/ARCH"},
		{"no platform", []string{"-platforms= "}, "no platform"},
		{"twice", []string{"-platforms=linux/amd64,linux/amd64"}, "given twice"},
		{"bad time", []string{"-created=yesterday"}, "want seconds since the epoch"},
		{"no module", []string{"-src=" + t.TempDir()}, "go build ./cmd/pleg for linux/amd64"},
		{"argument", []string{"extra"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"build", "-out", t.TempDir(), "-tag=t", "-version=v1", "-revision=r",
				"-platforms=linux/amd64", "-created=1"}, tc.args...)
			err := run(context.Background(), args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("image %q: %v, want an error with %q", args, err, tc.want)
			}
		})
	}
	if err := run(context.Background(), []string{"push", "-dir", t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no ref file") {
		t.Errorf("push of nothing: %v", err)
	}
	if err := run(context.Background(), []string{"push", "-dir", t.TempDir(), "-ref", "localhost:1/p:t"}); err == nil || !strings.Contains(err.Error(), "run make image first") {
		t.Errorf("push of nothing: %v", err)
	}
	if err := run(context.Background(), []string{"frobnicate"}); err == nil {
		t.Error("an unknown command did not fail")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
