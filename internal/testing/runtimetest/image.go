// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package runtimetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// writeImageArchive writes, atomically, a docker-archive (the `docker save`
// format that `ctr images import` reads) of a single-layer image holding bin
// as /testimg, with entrypoint ["/testimg"] and command ["pause"], tagged
// with every name in tags. The output is deterministic for a given binary.
func writeImageArchive(out, bin string, tags ...string) error {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	epoch := time.Unix(0, 0).UTC()
	layer, err := imageLayer(exe, epoch)
	if err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer)
	layerHex := hex.EncodeToString(layerSum[:])
	cfg, err := imageConfigJSON(layerHex, epoch)
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json" // as docker save names it
	layerName := layerHex + "/layer.tar"

	manifest, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: cfgName, RepoTags: tags, Layers: []string{layerName}}})
	if err != nil {
		return err
	}
	return writeTar(out, epoch, []tarFile{{cfgName, cfg}, {layerName, layer}, {"manifest.json", manifest}})
}

// imageLayer is the image's one layer: the binary as /testimg.
func imageLayer(exe []byte, epoch time.Time) ([]byte, error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(
		&tar.Header{
			Name:     "testimg",
			Mode:     0o755,
			Size:     int64(len(exe)),
			ModTime:  epoch,
			Typeflag: tar.TypeReg,
			Format:   tar.FormatPAX,
		},
	); err != nil {
		return nil, err
	}
	if _, err := lw.Write(exe); err != nil {
		return nil, err
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	return layer.Bytes(), nil
}

// imageConfigJSON is the image's configuration, over the layer.
func imageConfigJSON(layerHex string, epoch time.Time) ([]byte, error) {
	type imageConfig struct {
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd"`
		Env        []string `json:"Env"`
		WorkingDir string   `json:"WorkingDir"`
	}
	return json.Marshal(struct {
		Architecture string      `json:"architecture"`
		OS           string      `json:"os"`
		Created      time.Time   `json:"created"`
		Config       imageConfig `json:"config"`
		RootFS       struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      epoch,
		Config: imageConfig{
			Entrypoint: []string{"/testimg"},
			Cmd:        []string{"pause"},
			Env:        []string{"PATH=/"},
			WorkingDir: "/",
		},
		RootFS: struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		}{Type: "layers", DiffIDs: []string{"sha256:" + layerHex}},
	})
}

// tarFile is a file of an archive writeTar writes.
type tarFile struct {
	name string
	data []byte
}

// writeTar writes the files as a tar archive at out, whole or not at all.
func writeTar(out string, epoch time.Time, files []tarFile) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".image-*.tar")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	tw := tar.NewWriter(tmp)
	for _, f := range files {
		if err := tw.WriteHeader(
			&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg},
		); err != nil {
			_ = tmp.Close() // the write failed: that error is the one to tell
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			_ = tmp.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
