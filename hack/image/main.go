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
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
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
		return fmt.Errorf("usage: image build|push [flags] (image <command> -h for its flags)")
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
	default:
		return fmt.Errorf("unknown command %q: want build or push", args[0])
	}
}
