// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestDockerfile checks what the image's build relies on: base images
// pinned to a release, a static binary cross-compiled on the builder's
// platform, the version stamped, an empty final image.
func TestDockerfile(t *testing.T) {
	df := string(read(t, "Dockerfile"))
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/pleg", "FROM scratch", `ENTRYPOINT ["/pleg"]`,
		"FROM --platform=$BUILDPLATFORM", "GOOS=$TARGETOS GOARCH=$TARGETARCH", "-trimpath"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	goVersion := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\d+\.\d+)\.\d+$`).FindStringSubmatch(df)
	gomod := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(read(t, "../go.mod")))
	if goVersion == nil || gomod == nil || goVersion[1] != gomod[1] {
		t.Errorf("ARG GO_VERSION %v: want a patch release of go.mod's Go %v", goVersion, gomod)
	}
	for _, m := range regexp.MustCompile(`(?m)^FROM (?:--platform=\S+ )?(\S+)`).FindAllStringSubmatch(df, -1) {
		image := strings.ReplaceAll(m[1], "${GO_VERSION}", "1.26.8")
		if image != "scratch" && !regexp.MustCompile(`:\d+\.\d+\.\d+[-\w.]*(@sha256:[0-9a-f]{64})?$`).MatchString(image) {
			t.Errorf("base image %s: want it pinned to a release (name:X.Y.Z), not a moving tag", m[1])
		}
	}
}

// TestImageBuildsForEveryPlatform builds pleg as the Dockerfile does for
// each platform of docker-bake.hcl (no Docker engine here: the Go build
// is what differs between them), with the files .dockerignore leaves in
// the build context, and checks the version the build stamps.
func TestImageBuildsForEveryPlatform(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pleg for every platform")
	}
	bake := string(read(t, "docker-bake.hcl"))
	platforms := regexp.MustCompile(`"(linux/\w+)"`).FindAllStringSubmatch(
		regexp.MustCompile(`platforms\s*=\s*\[[^\]]*\]`).FindString(bake), -1)
	var got []string
	for _, p := range platforms {
		got = append(got, p[1])
	}
	if !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("docker-bake.hcl platforms %v, want linux/amd64 and linux/arm64", got)
	}
	ldflags := regexp.MustCompile(`-ldflags="([^"]*)"`).FindStringSubmatch(string(read(t, "Dockerfile")))
	if ldflags == nil {
		t.Fatal("Dockerfile: no -ldflags")
	}
	flags := strings.NewReplacer("${VERSION}", "v9.9.9-test", "${REVISION}", "0123abcd").Replace(ldflags[1])
	context := buildContext(t)
	for _, platform := range got {
		arch := strings.TrimPrefix(platform, "linux/")
		t.Run(arch, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "pleg")
			// As the Dockerfile builds it (and test/kube the pleg it runs:
			// they share Go's build cache).
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags="+flags, "-o", bin, "./cmd/pleg")
			cmd.Dir = context
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build for %s in the image's build context: %v\n%s", platform, err, out)
			}
			if arch != runtime.GOARCH {
				return
			}
			// It fails to reach a runtime, after printing its version.
			out, _ := exec.Command(bin, "version", "-r", "unix:///nonexistent.sock", "-t", "1s").Output()
			if first, _, _ := strings.Cut(string(out), "\n"); !strings.HasPrefix(first, "pleg:    v9.9.9-test, revision 0123abcd (go") {
				t.Errorf("pleg version: %q, want the version and revision the build stamped", first)
			}
		})
	}
}

// buildContext copies the repository's files that .dockerignore leaves in
// Docker's build context into a directory, and returns it.
func buildContext(t *testing.T) string {
	t.Helper()
	patterns := dockerignore(t)
	dir := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if ignored(patterns, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// dockerignore reads ../.dockerignore: one pattern a line, # comments.
// Exceptions (!) are refused, since ignored does not implement them.
func dockerignore(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var patterns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exception %q: this test does not implement them", line)
		}
		patterns = append(patterns, strings.Trim(path.Clean(line), "/"))
	}
	return patterns
}

// ignored reports whether Docker leaves rel out of the build context: a
// pattern matches the path or a directory above it, "**/" at its start
// matching any number of directories.
func ignored(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(p, "**/")
		for end := 1; end <= len(parts); end++ {
			for start := 0; start < end; start++ {
				if start > 0 && !anyDepth {
					break
				}
				if ok, _ := path.Match(p, strings.Join(parts[start:end], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}
