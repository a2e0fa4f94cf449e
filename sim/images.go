// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// RegistryImage is what the simulated registry holds for one reference.
type RegistryImage struct {
	// Digest is the manifest digest the reference resolves to,
	// "sha256:" and 64 hex digits. References resolving to one digest are
	// one image, with all their tags. Empty, the digest is made up from
	// the reference's repository path and tag.
	Digest string `json:"digest,omitempty"`
	// User is the image config's user, as an image sets it: "1002",
	// "www-data", "1003:1003".
	User string `json:"user,omitempty"`
}

// Registry is the content of the simulated registry, keyed by image
// reference ("busybox" stands for "docker.io/library/busybox:latest").
// Nothing is downloaded: a pull of any reference succeeds, and a reference
// absent from the Registry is an image of its own, the same on every
// registry host (registries mirror one another).
type Registry map[string]RegistryImage

// LoadRegistry reads a Registry from a YAML or JSON file: references
// mapped to their digest and user, unknown fields refused.
func LoadRegistry(path string) (Registry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reg Registry
	if err := yaml.UnmarshalStrict(b, &reg); err != nil {
		return nil, fmt.Errorf("registry %s: %w", path, err)
	}
	if _, err := reg.normalized(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reg, nil
}

// normalized returns the registry keyed by fully qualified references,
// or why it cannot be.
func (r Registry) normalized() (Registry, error) {
	out := make(Registry, len(r))
	var errs []error
	for _, ref := range slices.Sorted(maps.Keys(r)) {
		img := r[ref]
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("registry: image reference %q: %w", ref, err))
			continue
		}
		if img.Digest != "" {
			if _, err := digest.Parse(img.Digest); err != nil {
				errs = append(errs, fmt.Errorf("registry: digest of %q: %w", ref, err))
			}
		}
		out[reference.TagNameOnly(named).String()] = img
	}
	return out, errors.Join(errs...)
}

// identity is what a reference resolves to in the simulated registry.
type identity struct {
	id         string // the image ID: the digest of its (made-up) config
	tag        string // "repo:tag"; empty for a reference by digest
	repoDigest string // "repo@sha256:..."
	user       string
}

// identify resolves a reference as a pull would.
func (r Registry) identify(ref string) (identity, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return identity{}, fmt.Errorf("invalid image reference %q: %w", ref, err)
	}
	var (
		id  identity
		dgs string
	)
	if c, ok := named.(reference.Canonical); ok {
		dgs = c.Digest().String()
		id.user = r[named.String()].User
	} else {
		tagged, _ := reference.TagNameOnly(named).(reference.NamedTagged)
		id.tag = tagged.String()
		entry := r[id.tag]
		dgs, id.user = entry.Digest, entry.User
		if dgs == "" {
			// The path without the host: the same image on every registry.
			dgs = fakeDigest("manifest", reference.Path(named)+":"+tagged.Tag())
		}
	}
	id.repoDigest = named.Name() + "@" + dgs
	id.id = fakeDigest("config", dgs)
	return id, nil
}

// fakeDigest is a deterministic sha256 digest of what and s.
func fakeDigest(what, s string) string {
	h := sha256.Sum256([]byte(what + "\x00" + s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// imageIDOf is the image ID ref names: ref itself when it is an ID (with
// or without "sha256:"), else the ID it resolves to; "" for a reference
// that is neither.
func (r Registry) imageIDOf(ref string) string {
	if id, ok := asImageID(ref); ok {
		return id
	}
	if ident, err := r.identify(ref); err == nil {
		return ident.id
	}
	return ""
}

// asImageID returns ref as a full image ID if it is one.
func asImageID(ref string) (string, bool) {
	hexPart := strings.TrimPrefix(ref, "sha256:")
	if len(hexPart) != 64 {
		return "", false
	}
	if _, err := hex.DecodeString(hexPart); err != nil || strings.ToLower(hexPart) != hexPart {
		return "", false
	}
	return "sha256:" + hexPart, true
}

// images is the image store behind the ImageService: images as metadata,
// pulled from the simulated registry.
type images struct {
	reg  Registry
	mu   sync.Mutex
	byID map[string]*runtimeapi.Image
}

func newImages(reg Registry, refs ...string) *images {
	im := &images{reg: reg, byID: make(map[string]*runtimeapi.Image)}
	for _, ref := range refs {
		_, _ = im.pull(ref)
	}
	return im
}

// pull adds ref to the store, as a new image or as one more tag or digest
// of the image it resolves to.
func (im *images) pull(ref string) (*runtimeapi.Image, error) {
	ident, err := im.reg.identify(ref)
	if err != nil {
		return nil, err
	}
	img := im.byID[ident.id]
	if img == nil {
		img = &runtimeapi.Image{
			Id:   ident.id,
			Size: imageSize(ident.id),
			Spec: &runtimeapi.ImageSpec{Image: ident.id},
		}
		user, _, _ := strings.Cut(ident.user, ":")
		if uid, err := strconv.ParseInt(user, 10, 64); err == nil {
			img.Uid = &runtimeapi.Int64Value{Value: uid}
		} else {
			img.Username = user
		}
		im.byID[ident.id] = img
	}
	if ident.tag != "" && !slices.Contains(img.RepoTags, ident.tag) {
		img.RepoTags = append(img.RepoTags, ident.tag)
		slices.Sort(img.RepoTags)
	}
	if !slices.Contains(img.RepoDigests, ident.repoDigest) {
		img.RepoDigests = append(img.RepoDigests, ident.repoDigest)
		slices.Sort(img.RepoDigests)
	}
	img.Pinned = img.Pinned || ident.tag == PauseImage
	return img, nil
}

// imageSize makes up a size of 1 to 256 MiB from an image ID.
func imageSize(id string) uint64 {
	h := sha256.Sum256([]byte(id))
	return (1 + binary.BigEndian.Uint64(h[:8])%256) << 20
}

// find returns the image an ID, a tag or a digest reference names, or nil.
func (im *images) find(ref string) *runtimeapi.Image {
	if id, ok := asImageID(ref); ok {
		return im.byID[id]
	}
	ident, err := im.reg.identify(ref)
	if err != nil {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(im.byID)) {
		img := im.byID[id]
		if ident.tag != "" && slices.Contains(img.RepoTags, ident.tag) ||
			ident.tag == "" && slices.Contains(img.RepoDigests, ident.repoDigest) {
			return img
		}
	}
	return nil
}

// resolve returns the ID of the image a container of ref runs: the
// pulled image's, else the ID ref would have once pulled. Like critest,
// the simulator does not insist on a pull before CreateContainer: the
// kubelet always pulls first, and tests of pleg create containers of
// images they never pulled.
func (im *images) resolve(ref string) string {
	im.mu.Lock()
	defer im.mu.Unlock()
	if img := im.find(ref); img != nil {
		return img.Id
	}
	return im.reg.imageIDOf(ref)
}

// imageServer serves the CRI ImageService.
type imageServer struct {
	runtimeapi.UnimplementedImageServiceServer
	s *Sim
}

func (r *imageServer) call(ctx context.Context, o op) error {
	f, err := r.s.begin(ctx, o)
	if err != nil {
		return err
	}
	return r.s.finish(ctx, f, o, 0)
}

func (r *imageServer) ListImages(
	ctx context.Context,
	req *runtimeapi.ListImagesRequest,
) (*runtimeapi.ListImagesResponse, error) {
	if err := r.call(ctx, opListImages); err != nil {
		return nil, err
	}
	im := r.s.images
	im.mu.Lock()
	defer im.mu.Unlock()
	resp := &runtimeapi.ListImagesResponse{}
	if want := req.GetFilter().GetImage().GetImage(); want != "" {
		if img := im.find(want); img != nil {
			resp.Images = append(resp.Images, proto.CloneOf(img))
		}
		return resp, nil
	}
	all := slices.SortedFunc(maps.Values(im.byID), func(a, b *runtimeapi.Image) int { return cmp.Compare(a.Id, b.Id) })
	for _, img := range all {
		resp.Images = append(resp.Images, proto.CloneOf(img))
	}
	return resp, nil
}

func (r *imageServer) ImageStatus(
	ctx context.Context,
	req *runtimeapi.ImageStatusRequest,
) (*runtimeapi.ImageStatusResponse, error) {
	if err := r.call(ctx, opImageStatus); err != nil {
		return nil, err
	}
	im := r.s.images
	im.mu.Lock()
	defer im.mu.Unlock()
	// An absent image is a nil image, not an error, per the CRI.
	resp := &runtimeapi.ImageStatusResponse{}
	if img := im.find(req.GetImage().GetImage()); img != nil {
		resp.Image = proto.CloneOf(img)
	}
	return resp, nil
}

func (r *imageServer) PullImage(
	ctx context.Context,
	req *runtimeapi.PullImageRequest,
) (*runtimeapi.PullImageResponse, error) {
	if err := r.call(ctx, opPullImage); err != nil {
		return nil, err
	}
	im := r.s.images
	im.mu.Lock()
	defer im.mu.Unlock()
	img, err := im.pull(req.GetImage().GetImage())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.Id}, nil
}

// RemoveImage removes the image a reference names, with all its tags, as
// critest expects; removing an absent image succeeds, per the CRI.
func (r *imageServer) RemoveImage(
	ctx context.Context,
	req *runtimeapi.RemoveImageRequest,
) (*runtimeapi.RemoveImageResponse, error) {
	if err := r.call(ctx, opRemoveImage); err != nil {
		return nil, err
	}
	im := r.s.images
	im.mu.Lock()
	defer im.mu.Unlock()
	if img := im.find(req.GetImage().GetImage()); img != nil {
		delete(im.byID, img.Id)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (r *imageServer) ImageFsInfo(
	ctx context.Context,
	_ *runtimeapi.ImageFsInfoRequest,
) (*runtimeapi.ImageFsInfoResponse, error) {
	if err := r.call(ctx, opImageFsInfo); err != nil {
		return nil, err
	}
	im := r.s.images
	im.mu.Lock()
	defer im.mu.Unlock()
	var used uint64
	for _, img := range im.byID {
		used += img.Size
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  r.s.clock.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: r.s.opts.imageFsMountpoint()},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(im.byID))},
	}}}, nil
}
