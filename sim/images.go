// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageID is the ID the simulator gives an image: a digest of its name.
func imageID(name string) string {
	if name == "" {
		return ""
	}
	h := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(h[:])
}

// images is the image store behind the ImageService: enough for crictl.
// Pulls succeed at once for any name; nothing is downloaded.
type images struct {
	mu     sync.Mutex
	byName map[string]*runtimeapi.Image
}

func newImages(names ...string) *images {
	im := &images{byName: make(map[string]*runtimeapi.Image)}
	for _, n := range names {
		im.add(n)
	}
	return im
}

func (im *images) add(name string) *runtimeapi.Image {
	if img, ok := im.byName[name]; ok {
		return img
	}
	img := &runtimeapi.Image{
		Id:       imageID(name),
		RepoTags: []string{name},
		Size:     uint64(len(name)) << 20,
		Spec:     &runtimeapi.ImageSpec{Image: name},
		Pinned:   name == PauseImage,
	}
	im.byName[name] = img
	return img
}

// find returns the image with a name or an ID (full, or without its
// "sha256:" prefix).
func (im *images) find(ref string) *runtimeapi.Image {
	if img, ok := im.byName[ref]; ok {
		return img
	}
	for _, name := range slices.Sorted(maps.Keys(im.byName)) {
		if img := im.byName[name]; img.Id == ref || img.Id == "sha256:"+ref {
			return img
		}
	}
	return nil
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
	for _, name := range slices.Sorted(maps.Keys(im.byName)) {
		img := im.byName[name]
		if want := req.GetFilter().GetImage().GetImage(); want != "" && name != want && img.Id != want {
			continue
		}
		resp.Images = append(resp.Images, img)
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
	return &runtimeapi.ImageStatusResponse{Image: im.find(req.GetImage().GetImage())}, nil
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
	return &runtimeapi.PullImageResponse{ImageRef: im.add(req.GetImage().GetImage()).Id}, nil
}

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
		for _, tag := range img.RepoTags {
			delete(im.byName, tag)
		}
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
	for _, img := range im.byName {
		used += img.Size
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  r.s.clock.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/pleg-sim/images"},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(im.byName))},
	}}}, nil
}
