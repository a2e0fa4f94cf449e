// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The files build writes into its output directory: the cluster tests and
// the release workflow read them by these names.
const (
	layoutDir   = "oci"
	archiveFile = "pleg.tar"
	sbomFile    = "sbom.spdx.json"
	digestFile  = "digest"
	refFile     = "ref"
)

// versionPkg is where `make build` stamps the version and the revision.
const versionPkg = "github.com/plegkit/pleg/internal/version"

// The image's fixed contents.
const (
	binaryPath  = "/pleg"
	metricsPort = "9847/tcp"
	projectURL  = "https://github.com/plegkit/pleg"
	description = "pleg, a pod lifecycle event generator for CRI runtimes (containerd, CRI-O)"
)

// Annotations by which containerd's `ctr images import` and the OCI tools
// name an image of an index.json.
const (
	containerdNameAnnotation = "io.containerd.image.name"
	refNameAnnotation        = "org.opencontainers.image.ref.name"
)

// buildOptions is what `image build` is asked for.
type buildOptions struct {
	Src       string     // the repository's root: the module that holds ./cmd/pleg
	Out       string     // the output directory
	Repo      string     // the image's repository, e.g. ghcr.io/plegkit/pleg
	Tag       string     // its tag
	Platforms []platform // one image each, in this order in the index
	Version   string     // stamped into the binary and the labels
	Revision  string     // likewise
	Created   time.Time  // every timestamp of the image
	Go        string     // the go command
}

// platform is an image's OS and architecture, as Go and OCI name them.
type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "/" + p.Arch }

// parsePlatforms parses a comma-separated list of linux/ARCH.
func parsePlatforms(s string) ([]platform, error) {
	var ps []platform
	seen := map[platform]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		goos, arch, ok := strings.Cut(f, "/")
		if !ok || goos != "linux" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want linux/ARCH (linux/amd64, linux/arm64), without a variant", f)
		}
		p := platform{goos, arch}
		if seen[p] {
			return nil, fmt.Errorf("platform %q given twice", f)
		}
		seen[p] = true
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("no platform given (IMAGE_PLATFORMS): want e.g. linux/amd64,linux/arm64")
	}
	return ps, nil
}

func parseBuildFlags(args []string) (buildOptions, error) {
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	var o buildOptions
	fs.StringVar(&o.Src, "src", ".", "the repository's root")
	fs.StringVar(&o.Out, "out", "_output/image", "the output directory (IMAGE_DIR)")
	fs.StringVar(&o.Repo, "repo", "ghcr.io/plegkit/pleg", "the image's repository (IMAGE_REPO)")
	fs.StringVar(&o.Tag, "tag", "", "the image's tag (IMAGE_TAG)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms (IMAGE_PLATFORMS)")
	fs.StringVar(&o.Version, "version", "", "the version stamped into pleg (VERSION)")
	fs.StringVar(&o.Revision, "revision", "", "the commit stamped into pleg (REVISION)")
	created := fs.String("created", "",
		"the image's timestamps, in seconds since the epoch (default: $SOURCE_DATE_EPOCH, or else the commit's time)")
	fs.StringVar(&o.Go, "go", "go", "the go command")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("image build: unexpected arguments %q", fs.Args())
	}
	var err error
	if o.Platforms, err = parsePlatforms(*platforms); err != nil {
		return o, err
	}
	if o.Created, err = creationTime(o.Src, *created); err != nil {
		return o, err
	}
	return o, nil
}

// creationTime is flagValue, or else $SOURCE_DATE_EPOCH, or else the time
// of the commit checked out in src: never the clock, so that two builds of
// a commit are the same image.
func creationTime(src, flagValue string) (time.Time, error) {
	v, from := flagValue, "-created"
	if v == "" {
		v, from = os.Getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH"
	}
	if v == "" {
		out, err := exec.Command("git", "-C", src, "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, fmt.Errorf(
				"no -created nor SOURCE_DATE_EPOCH, and the commit's time is unknown (git log: %w)", err)
		}
		v, from = strings.TrimSpace(string(out)), "git log -1 --format=%ct"
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, fmt.Errorf("%s = %q: want seconds since the epoch", from, v)
	}
	return time.Unix(secs, 0).UTC(), nil
}

func (o buildOptions) validate() (name.Tag, error) {
	if o.Tag == "" {
		return name.Tag{}, errors.New("no tag (IMAGE_TAG, by default VERSION from git describe)")
	}
	if o.Version == "" {
		return name.Tag{}, errors.New("no version (VERSION, from git describe): pleg would not know what it is")
	}
	if o.Revision == "" {
		return name.Tag{}, errors.New("no revision (REVISION, from git rev-parse HEAD)")
	}
	if len(o.Platforms) == 0 {
		return name.Tag{}, errors.New("no platform")
	}
	ref, err := name.NewTag(o.Repo+":"+o.Tag, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("IMAGE_REPO:IMAGE_TAG %q is no image reference: %w", o.Repo+":"+o.Tag, err)
	}
	return ref, nil
}

// buildResult is what build wrote.
type buildResult struct {
	Ref    name.Tag
	Digest v1.Hash // the index's
}

// build builds the image and writes it to o.Out, replacing what a former
// build left there.
func build(ctx context.Context, o buildOptions, logf func(string, ...any)) (buildResult, error) {
	ref, err := o.validate()
	if err != nil {
		return buildResult{}, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return buildResult{}, err
	}
	// Everything goes to a directory beside the outputs, then into place:
	// a failed build leaves no half-written image under the usual names.
	stage, err := os.MkdirTemp(o.Out, ".build-")
	if err != nil {
		return buildResult{}, err
	}
	defer func() { _ = os.RemoveAll(stage) }()

	anns := o.annotations()
	var adds []mutate.IndexAddendum
	var binaries []builtBinary
	for _, p := range o.Platforms {
		bin := filepath.Join(stage, "bin", p.OS+"_"+p.Arch, "pleg")
		logf("go build ./cmd/pleg for %s (version %s)", p, o.Version)
		if err := o.goBuild(ctx, p, bin); err != nil {
			return buildResult{}, err
		}
		exe, err := os.ReadFile(bin)
		if err != nil {
			return buildResult{}, err
		}
		binaries = append(binaries, builtBinary{platform: p, path: bin})
		img, err := o.image(p, exe, anns)
		if err != nil {
			return buildResult{}, fmt.Errorf("image for %s: %w", p, err)
		}
		if size, err := layerSize(img); err == nil {
			logf("%s: /pleg %.1f MB, its layer %.1f MB compressed", p, float64(len(exe))/1e6, float64(size)/1e6)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}},
		})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	idx, ok := mutate.Annotations(idx, anns).(v1.ImageIndex)
	if !ok {
		return buildResult{}, errors.New("annotating the index did not give an index")
	}
	digest, err := idx.Digest()
	if err != nil {
		return buildResult{}, err
	}

	if err := o.writeOutputs(stage, ref, idx, digest, binaries); err != nil {
		return buildResult{}, err
	}
	for _, f := range []string{layoutDir, archiveFile, sbomFile, digestFile, refFile} {
		dst := filepath.Join(o.Out, f)
		if err := os.RemoveAll(dst); err != nil {
			return buildResult{}, err
		}
		if err := os.Rename(filepath.Join(stage, f), dst); err != nil {
			return buildResult{}, err
		}
	}
	logf("%s@%s in %s", ref, digest, o.Out)
	return buildResult{Ref: ref, Digest: digest}, nil
}

// writeOutputs writes into dir the files build makes of idx.
func (o buildOptions) writeOutputs(
	dir string, ref name.Tag, idx v1.ImageIndex, digest v1.Hash, binaries []builtBinary,
) error {
	lp, err := layout.Write(filepath.Join(dir, layoutDir), empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		containerdNameAnnotation: ref.String(),
		refNameAnnotation:        ref.TagStr(),
	})); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	// go-containerregistry writes some blobs readable by their owner
	// alone: the layout is for anyone to copy or serve.
	if err := readableByAll(filepath.Join(dir, layoutDir)); err != nil {
		return err
	}
	if err := writeArchive(filepath.Join(dir, archiveFile), filepath.Join(dir, layoutDir), o.Created); err != nil {
		return fmt.Errorf("writing the OCI archive: %w", err)
	}
	sbom, err := o.sbom(ref, digest, binaries)
	if err != nil {
		return fmt.Errorf("SBOM: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, sbomFile), sbom, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, digestFile), []byte(digest.String()+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, refFile), []byte(ref.String()+"\n"), 0o644); err != nil {
		return err
	}
	return nil
}

// annotations are the org.opencontainers.image labels, on the image's
// configuration and as annotations of its manifests and index.
func (o buildOptions) annotations() map[string]string {
	const p = "org.opencontainers.image."
	return map[string]string{
		p + "title":       "pleg",
		p + "description": description,
		p + "source":      projectURL,
		p + "url":         projectURL,
		p + "version":     o.Version,
		p + "revision":    o.Revision,
		p + "created":     o.Created.Format(time.RFC3339),
		p + "licenses":    "Apache-2.0",
		p + "vendor":      "The pleg Authors",
	}
}

// ldflags stamp the version and the revision as `make build` does, and
// leave out the symbol table and the DWARF debugging information (-s -w):
// half the binary, which nothing in the image reads. What the image's
// tools do read stays: the build information (`go version -m`, the SBOM's
// modules, `pleg version`) is a section of its own, and a panic's stack
// trace comes from the runtime's own tables, not from the symbols.
func (o buildOptions) ldflags() string {
	return fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", versionPkg, o.Version, versionPkg, o.Revision)
}

// goBuild cross-compiles a static ./cmd/pleg for p into out.
func (o buildOptions) goBuild(ctx context.Context, p platform, out string) error {
	// -buildvcs=false: the revision is stamped by -ldflags; Go's own VCS
	// stamp would make the build fail where git cannot read the tree.
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", o.ldflags(), "-o", out, "./cmd/pleg")
	cmd.Dir = o.Src
	// The environment's choices of microarchitecture would change the
	// binary (and what it runs on): the platform's baseline, always.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch,
		"GOAMD64=v1", "GOARM64=v8.0", "GO386=", "GOARM=")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/pleg for %s in %s failed: %w\n%s", p, o.Src, err, stderr.String())
	}
	return nil
}

// image is the image of one platform: exe as /pleg in one layer.
func (o buildOptions) image(p platform, exe []byte, anns map[string]string) (v1.Image, error) {
	tarred, err := layerTar(exe, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarred)), nil },
		tarball.WithMediaType(types.OCILayer),
		// Level 6: within half a percent of level 9 for this binary, in
		// half the time (and a fraction of it under the race detector).
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created}
	cfg := &v1.ConfigFile{
		Architecture: p.Arch,
		OS:           p.OS,
		Created:      created,
		Config: v1.Config{
			Entrypoint:   []string{binaryPath},
			Cmd:          []string{"run"},
			ExposedPorts: map[string]struct{}{metricsPort: {}},
			Labels:       anns,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "CGO_ENABLED=0 go build -trimpath -ldflags '" + o.ldflags() + "' ./cmd/pleg",
			Comment:   "hack/image",
		},
	})
	if err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, anns).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the image did not give an image")
	}
	return annotated, nil
}

// layerSize is the compressed size of img's one layer, what a node pulls.
func layerSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += size
	}
	return n, nil
}

// layerTar is the image's one layer, uncompressed: exe as /pleg, owned by
// root, with the fixed time, nothing of the machine that built it.
func layerTar(exe []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(binaryPath, "/"),
		Mode:     0o755,
		Size:     int64(len(exe)),
		ModTime:  mtime,
		Format:   tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(exe); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes the OCI layout in dir as a tar file: an OCI archive,
// which `ctr images import` reads. Entries are in lexical order, with
// fixed times and owners.
func writeArchive(out, dir string, mtime time.Time) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// readableByAll makes the files under dir 0644, the directories 0755.
func readableByAll(dir string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(path, 0o755)
		}
		return os.Chmod(path, 0o644)
	})
}
