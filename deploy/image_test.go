// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/plegkit/pleg/internal/testing/runtimetest"
)

// makeVar is the default a Makefile variable is given (`NAME ?= value`).
func makeVar(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` \?= (.+)$`).FindStringSubmatch(string(read(t, "../Makefile")))
	if m == nil {
		t.Fatalf("Makefile: no %s ?=", name)
	}
	return m[1]
}

// TestImageReference: the image `make image` builds is the one the
// manifests and the chart run.
func TestImageReference(t *testing.T) {
	repo := makeVar(t, "IMAGE_REPO")
	var values struct {
		Image struct{ Repository string } `json:"image"`
	}
	if err := yaml.Unmarshal(read(t, "../charts/pleg/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository != repo {
		t.Errorf("the chart's image.repository %q, make image's IMAGE_REPO %q", values.Image.Repository, repo)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(read(t, "../charts/pleg/Chart.yaml"), &chart); err != nil {
		t.Fatal(err)
	}
	if want := "image: " + repo + ":" + chart.AppVersion + "\n"; !strings.Contains(string(read(t, "daemonset.yaml")), want) {
		t.Errorf("daemonset.yaml does not run %q", strings.TrimSpace(want))
	}
	for _, gone := range []string{"Dockerfile", "docker-bake.hcl", "../.dockerignore"} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("%s is back: make image is the one way to build the image", gone)
		}
	}
}

// TestImageImportsIntoContainerd runs make image as the cluster test does
// (this machine's platform), imports pleg.tar into the newest containerd
// with ctr, and asks the CRI image service for the name in the ref file,
// as the kubelet asks before it would pull.
func TestImageImportsIntoContainerd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image and starts containerd")
	}
	if _, err := exec.LookPath("make"); err != nil {
		if runtimetest.InCI() {
			t.Fatalf("make is required under CI=true: %v", err)
		}
		t.Skipf("no make: %v", err)
	}
	versions := runtimetest.DefaultContainerdVersions
	in := runtimetest.Require(t, runtimetest.Spec{Kind: runtimetest.Containerd, Version: versions[len(versions)-1]})

	dir := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "image", "IMAGE_PLATFORMS=linux/"+runtime.GOARCH,
		"IMAGE_DIR="+dir, "IMAGE_TAG=deploy-test")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	ref := strings.TrimSpace(string(read(t, filepath.Join(dir, "ref"))))
	if want := makeVar(t, "IMAGE_REPO") + ":deploy-test"; ref != want {
		t.Fatalf("ref file %q, want %q", ref, want)
	}
	digest := strings.TrimSpace(string(read(t, filepath.Join(dir, "digest"))))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	socket := strings.TrimPrefix(in.Endpoint, "unix://")
	ctr := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, in.Bin.Ctr, append([]string{"--address", socket, "--namespace", runtimetest.CRINamespace}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The instance's CRI plugin unpacks into the native snapshotter.
	ctr("images", "import", "--snapshotter", "native", filepath.Join(dir, "pleg.tar"))
	names := strings.Fields(ctr("images", "ls", "-q"))
	if !slices.Contains(names, ref) {
		t.Fatalf("ctr images ls: %q, want %s", names, ref)
	}
	st, err := in.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetImage() == nil {
		t.Fatalf("the CRI image service does not know %s: the kubelet would pull it", ref)
	}
	// The image the CRI resolved is this platform's of the index: its ID
	// is that image's configuration digest. (Its repo digests stay empty:
	// the CRI plugin records them for a pull, not for an import.)
	if want := configDigest(t, filepath.Join(dir, "oci"), digest, runtime.GOARCH); !slices.Contains(st.GetImage().GetRepoTags(), ref) ||
		st.GetImage().GetId() != want {
		t.Errorf("image %s, tags %v: want %s, tagged %s", st.GetImage().GetId(), st.GetImage().GetRepoTags(), want, ref)
	}
}

// configDigest follows the OCI layout from its index.json to the image
// index (which must be index), to the manifest for linux/arch, to its
// configuration's digest.
func configDigest(t *testing.T, layout, index, arch string) string {
	t.Helper()
	type descriptor struct {
		Digest   string `json:"digest"`
		Platform *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	var doc struct {
		Manifests []descriptor `json:"manifests"`
		Config    descriptor   `json:"config"`
	}
	blob := func(digest string) []byte {
		hex, ok := strings.CutPrefix(digest, "sha256:")
		if !ok {
			t.Fatalf("digest %q", digest)
		}
		return read(t, filepath.Join(layout, "blobs", "sha256", hex))
	}
	if err := json.Unmarshal(read(t, filepath.Join(layout, "index.json")), &doc); err != nil || len(doc.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(doc.Manifests))
	}
	if doc.Manifests[0].Digest != index {
		t.Fatalf("index.json names %s, the digest file %s", doc.Manifests[0].Digest, index)
	}
	if err := json.Unmarshal(blob(doc.Manifests[0].Digest), &doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range doc.Manifests {
		if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == arch {
			doc.Config = descriptor{}
			if err := json.Unmarshal(blob(m.Digest), &doc); err != nil {
				t.Fatal(err)
			}
			return doc.Config.Digest
		}
	}
	t.Fatalf("the image index has no linux/%s manifest", arch)
	return ""
}
