// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command image builds pleg's container image without a container engine,
// and pushes it. `make image` runs its build command:
//
//	image build -src DIR -out DIR -repo REPO -tag TAG -platforms linux/amd64,linux/arm64 \
//	    -version V -revision R [-created UNIX-SECONDS]
//
// cross-compiles ./cmd/pleg once per platform (CGO_ENABLED=0, -trimpath,
// the version and revision stamped as `make build` stamps them) and writes
// into -out an OCI image layout (oci/), the same index as an OCI archive
// (pleg.tar, for `ctr images import`), an SPDX 2.3 SBOM (sbom.spdx.json),
// the index's digest (digest) and its reference (ref). The same commit
// gives the same digest: every timestamp is -created (SOURCE_DATE_EPOCH,
// or else the commit's time).
//
//	image push -dir DIR [-ref REF]
//
// pushes the index of DIR/oci to REF (default: DIR/ref) and attaches
// DIR/sbom.spdx.json to it as an OCI 1.1 referrer, with the credentials of
// the Docker config (~/.docker/config.json, as `crane auth login` or
// `docker login` writes it).
//
//	image sign -ref REPO@DIGEST -key cosign.key
//	image verify -ref REPO@DIGEST -key cosign.pub
//
// sign and check a signature as cosign does with a key (sign.go): `cosign
// verify --key cosign.pub --insecure-ignore-tlog` checks what sign pushes.
//
//	image release -src DIR -dir DIR -tag vX.Y.Z -chart-repo oci://HOST/PATH -key cosign.key [-helm CMD]
//
// is what .github/workflows/release.yml runs after `make image` (`make
// release`): it checks that the tag is the chart's version and appVersion,
// a heading of CHANGELOG.md and the image's version; pushes the image with
// its SBOM and signs it; packages the chart with helm, pushes it and signs
// it; and checks both signatures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: image build|push|sign|verify|release [flags] (image <command> -h for its flags)")
	}
	switch args[0] {
	case "build":
		opts, err := parseBuildFlags(args[1:])
		if err != nil {
			return err
		}
		res, err := build(ctx, opts, func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		})
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s\n", res.Ref, res.Digest)
		return nil
	case "push":
		opts, err := parsePushFlags(args[1:])
		if err != nil {
			return err
		}
		return push(ctx, opts, func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		})
	case "sign":
		opts, err := parseSignFlags(args[1:])
		if err != nil {
			return err
		}
		return sign(ctx, opts, func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		})
	case "verify":
		fs := flag.NewFlagSet("image verify", flag.ContinueOnError)
		ref := fs.String("ref", "", "what was signed, by digest: REPO@sha256:...")
		key := fs.String("key", "", "the public key, PEM (cosign.pub)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		d, err := name.NewDigest(*ref)
		if err != nil {
			return fmt.Errorf("-ref %q: want REPO@sha256:... (%w)", *ref, err)
		}
		n, err := verify(ctx, d, *key, authn.DefaultKeychain)
		if err != nil {
			return err
		}
		fmt.Printf("%s: signed by %s (%d signatures)\n", d, *key, n)
		return nil
	case "release":
		opts, err := parseReleaseFlags(args[1:])
		if err != nil {
			return err
		}
		res, err := release(ctx, opts, func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		})
		if err != nil {
			return err
		}
		fmt.Printf("image %s\nchart %s\n", res.Image, res.Chart)
		return nil
	default:
		return fmt.Errorf("unknown command %q: want build, push, sign, verify or release", args[0])
	}
}
