// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/plegkit/pleg/internal/testing/doccmd"
)

// TestDocCommands runs the commands of README.md and docs/ that are
// hack/image's (internal/testing/doccmd.Assignments) as they are written, in
// order, from the repository's root: make image, then crane (this
// module's tool) pushing the layout it wrote, to a registry on loopback
// in place of registry.example. What arrives is the index make image
// built.
func TestDocCommands(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := doccmd.For(root, doccmd.ByImage)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, "crane"), "github.com/google/go-containerregistry/cmd/crane")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building crane: %v\n%s", err, out)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	var pushed []string
	for _, c := range cmds {
		text := strings.ReplaceAll(c.Text, "registry.example", host)
		t.Logf("%s", c)
		cmd := exec.CommandContext(ctx, "bash", "-c", text)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		if f := strings.Fields(text); len(f) > 0 && f[0] == "crane" {
			pushed = append(pushed, f[len(f)-1])
		}
	}
	if len(pushed) == 0 {
		t.Fatal("the docs push the image nowhere: no crane command among hack/image's")
	}
	want, err := os.ReadFile(filepath.Join(root, "_output", "image", "digest"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range pushed {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(tag)
		if err != nil {
			t.Fatalf("%s after the push: %v", ref, err)
		}
		if desc.Digest.String() != strings.TrimSpace(string(want)) {
			t.Errorf("%s is %s (%s), want make image's index %s", ref, desc.Digest, desc.MediaType, want)
		}
	}
}
